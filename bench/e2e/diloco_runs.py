"""What bench/run diloco and bench/run diloco-wan share: the protocol (docs/training.md, "One
protocol for every method"), the methods' flags, and running a method as PEERS longhaul-train
peers and a longhaul-master (on loopback, or in a lab's namespaces). Imported; no side effects
on import beyond the START clock.
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

START = time.monotonic()
CHILDREN = []  # processes started here and not yet reaped


def log(msg):
    print(f"[{time.monotonic() - START:7.1f}s] {msg}", file=sys.stderr, flush=True)


def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


# -- the protocol -------------------------------------------------------------------------------

PEERS = 4
# key -> (longhaul-train flags of the method, H); every method also gets the common flags.
METHODS = {
    "dp": (["--method", "dp"], None),
    "diloco_h50_f32": (["--method", "diloco", "--codec", "none"], 50),
    "diloco_h50_u8": (["--method", "diloco", "--codec", "u8"], 50),
    "diloco_h50_4bit": (["--method", "diloco", "--codec", "e3m0"], 50),
    "diloco_h100_f32": (["--method", "diloco", "--codec", "none"], 100),
    "diloco_h100_u8": (["--method", "diloco", "--codec", "u8"], 100),
    "diloco_h100_4bit": (["--method", "diloco", "--codec", "e3m0"], 100),
    # The sparse codec (docs/training.md, "Sparse pseudo-gradients"): top 64 of every 4,096, 2 bits
    # a value, error feedback, through the sparse all-gather.
    "diloco_h50_sparse": (["--method", "diloco", "--codec", "sparse"], 50),
    # Streaming DiLoCo: F = 4 fragments, tau = 1; longhaul-train's fragment layout gives layer l
    # to fragment l mod 4 and cuts wte, wpe and lnf into 4 row blocks (the embeddings spread).
    "streaming": (["--method", "streaming", "--fragments", "4", "--delay", "1", "--codec", "none"], 50),
    "co2": (["--method", "co2", "--codec", "none"], 50),
    # Not in the default run: Streaming with the paper's merge, alpha = 0.5 (the engine's default
    # is 0, torchft's), the attempt at streaming_loss_vs_diloco. `--methods streaming_mix05`.
    "streaming_mix05": (["--method", "streaming", "--fragments", "4", "--delay", "1", "--codec", "none",
                         "--mix", "0.5"], 50),
    "eager": (["--method", "eager", "--codec", "none"], 50),
    # Not in the default run: CO2 with its staleness gap penalty (the stale average halved), the
    # second attempt at co2_loss_vs_diloco (docs/training.md). `--methods co2_gap2` runs it.
    "co2_gap2": (["--method", "co2", "--codec", "none", "--co2-gap-penalty", "2"], 50),
    # second attempt at eager_loss_vs_diloco: DiLoCo's outer lr halved, the largest of 0.7/2^k
    # for which the one-round-delayed loop is stable in the scalar model of docs/training.md.
    "eager_lr035": (["--method", "eager", "--codec", "none", "--outer-lr", "0.35"], 50),
    # Not in the default run: the grid's other H, for --confirm-grid.
    "diloco_h10_f32": (["--method", "diloco", "--codec", "none"], 10),
    # bench/run diloco-wan's passes for the overlap issue (docs/overlap.md): Streaming whose tau
    # follows the path, up to the schedule's bound (floor(H / F) = 12 steps); f32 and u8 fragments.
    "streaming_adaptive": (["--method", "streaming", "--fragments", "4", "--delay", "1", "--codec", "none",
                            "--adaptive-delay", "--max-staleness-steps", "12"], 50),
    "streaming_u8_adaptive": (["--method", "streaming", "--fragments", "4", "--delay", "1", "--codec", "u8",
                               "--adaptive-delay", "--max-staleness-steps", "12"], 50),
}
DEFAULT_METHODS = [k for k in METHODS if k not in ("co2_gap2", "eager_lr035", "diloco_h10_f32", "streaming_mix05",
                                                   "streaming_adaptive", "streaming_u8_adaptive")]
NESTEROV = {"diloco", "streaming", "eager"}  # the methods --outer-lr applies to (not CO2's own)


def protocol(a):
    """The figures every method shares (the smoke mode shrinks them only to test the plumbing)."""
    if a.smoke:
        return {"steps": 20, "batch": 4, "warmup": 2, "val_every": 10, "val_batches": 4, "threads": 1,
                "context": 32,
                "model": ["--layers", "1", "--channels", "32", "--heads", "2", "--context", "32"],
                "h_scale": 0.1, "shaped_s": 8}
    # 4 layers (not the trainer's default 5) so that Streaming's F = 4 fragments hold one layer
    # each, as in the paper's layout; 144 channels keep the size at about 1M (1,058,400).
    # Validation: the trainer's default set, 16 x 16 windows of 128 bytes, whatever the batch.
    # Warmup: the first sixth of the steps (50 of 300), the schedule's shape at any length.
    return {"steps": a.steps, "batch": a.batch, "warmup": a.steps // 6, "val_every": a.val_every,
            "val_batches": 16 * 16 // a.batch, "threads": 1, "context": 128,
            "model": ["--layers", "4", "--channels", "144", "--heads", "4", "--context", "128"],
            "h_scale": 1.0, "shaped_s": getattr(a, "shaped_s", None),
            "outer_lr": getattr(a, "outer_lr", None)}


def h_of(p, key):
    h = METHODS[key][1]
    return None if h is None else max(1, int(h * p["h_scale"]))


def common_flags(p, seed, steps, out):
    return ["--steps", str(steps), "--batch", str(p["batch"]), "--warmup", str(p["warmup"]),
            "--threads", str(p["threads"]), "--seed", str(seed), "--val-every", str(p["val_every"]),
            "--val-batches", str(p["val_batches"]), "--out", out, "--json", "--no-plot", *p["model"]]


def method_flags(p, key):
    flags, _ = METHODS[key]
    h = h_of(p, key)
    lr = p.get("outer_lr")
    own_lr = "--outer-lr" in flags or flags[1] not in NESTEROV
    return (flags + (["--sync-every", str(h)] if h else [])
            + (["--outer-lr", str(lr)] if lr is not None and not own_lr else []))


# -- processes ----------------------------------------------------------------------------------

_LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """In the child before exec: SIGKILL when this bench dies, even by SIGKILL, so that no
    trainer or master outlives it (`ip netns exec` execs the program, which keeps the setting)."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(cmd, out_path, err_path):
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, preexec_fn=_die_with_parent)
    CHILDREN.append(p)
    return p


def reap(p, term_first=False):
    if p.poll() is None:
        try:
            p.send_signal(signal.SIGTERM if term_first else signal.SIGKILL)
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        except ProcessLookupError:
            pass
    if p in CHILDREN:
        CHILDREN.remove(p)


def reap_all():
    for p in list(CHILDREN):
        reap(p)


def wait_all(procs, deadline):
    """Waits for every process; kills them all at the deadline or as soon as one fails."""
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
            break
        if time.monotonic() > deadline:
            for p in procs:
                reap(p)
            return False
        time.sleep(0.05)
    for p in procs:
        reap(p)
    return True


def tail(path, n=800):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:].strip()
    except OSError:
        return ""


def last_json(path):
    lines = [ln for ln in open(path).read().splitlines() if ln.strip().startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON line in {path}: {tail(path.replace('.out', '.err'))}")
    return json.loads(lines[-1])


class Bench:
    def __init__(self, a):
        self.a = a
        self.p = protocol(a)
        build = os.environ.get("LONGHAUL_BUILD", os.path.join(HERE, "../../build/release"))
        self.trainer = os.path.abspath(os.path.join(build, "tools/longhaul-train/longhaul-train"))
        self.master = os.path.abspath(os.path.join(build, "tools/longhaul-master/longhaul-master"))
        for b in (self.trainer, self.master):
            if not os.access(b, os.X_OK):
                raise SystemExit(f"bench diloco: {b} not built (run bench/run diloco)")
        self.tmp = tempfile.mkdtemp(prefix="lh-diloco-bench-")
        self.seq = 0

    def start_master(self, prefix, addr):
        self.seq += 1
        port_file = os.path.join(self.tmp, f"master-{self.seq}.port")
        err = os.path.join(self.tmp, f"master-{self.seq}.err")
        # info: the peers' registrations, which group() waits for one by one (wait_registered).
        m = spawn(prefix + [self.master, "--listen", f"{addr}:0", "--port-file", port_file,
                            "--log-level", "info"], os.devnull, err)
        t_end = time.monotonic() + 15
        while not (os.path.exists(port_file) and open(port_file).read().strip().isdigit()):
            if m.poll() is not None or time.monotonic() > t_end:
                reap(m)
                raise RuntimeError(f"longhaul-master did not start: {tail(err)}")
            time.sleep(0.02)
        time.sleep(0.05)  # the file may have been caught mid-write
        self.master_log = err
        return m, int(open(port_file).read())

    def wait_registered(self, master, count, peer, timeout_s=60):
        """Waits until the master has logged `count` registrations. The master numbers peers in
        the order they register and the ring follows those ids; the ring all-reduce re-encodes
        partial sums at every hop, so a quantized method's loss depends on that order. Starting
        each peer once the one before it registered makes peer index i peer id i + 1 in every run
        (docs/training.md, "Three seeds")."""
        t_end = time.monotonic() + timeout_s
        while True:
            with open(self.master_log, errors="replace") as f:
                if f.read().count(" joined group ") >= count:
                    return
            if master.poll() is not None or peer.poll() is not None or time.monotonic() > t_end:
                raise RuntimeError(f"peer {count - 1} did not register with the master: "
                                   f"{tail(self.master_log)}")
            time.sleep(0.01)

    def group(self, key, seed, steps, lab=None, extra=(), timeout_s=3600, protocol=None):
        """Runs method `key` as PEERS peers and a master under `protocol` (default: the bench's);
        returns (every peer's JSON, their out dirs). "{peer}" in an extra flag becomes the peer's
        index."""
        p = protocol or self.p
        prefix = (lambda i: lab.exec_prefix(i)) if lab else (lambda i: [])
        addr = (lambda i: lab.addr(i)) if lab else (lambda i: "127.0.0.1")
        maddr = lab.master_addr() if lab else "127.0.0.1"
        master, port = self.start_master(lab.master_prefix() if lab else [], maddr)
        procs, files = [], []
        try:
            self.seq += 1
            for i in range(PEERS):
                out = os.path.join(self.tmp, f"{self.seq:03d}-{key}-s{seed}-p{i}")
                files.append(out)
                cmd = prefix(i) + [self.trainer, "--master", f"{maddr}:{port}", "--peers", str(PEERS),
                                   "--peer-index", str(i), "--listen", f"{addr(i)}:0",
                                   *common_flags(p, seed, steps, out), *method_flags(p, key),
                                   *(x.replace("{peer}", str(i)) for x in extra)]
                if i > 0:  # every peer holds the same theta_g: peer 0's curve is the group's
                    cmd[cmd.index("--val-every") + 1] = str(10 ** 9)
                procs.append(spawn(cmd, out + ".out", out + ".err"))
                self.wait_registered(master, i + 1, procs[-1])
            if not wait_all(procs, time.monotonic() + timeout_s):
                raise RuntimeError(f"{key} timed out after {timeout_s} s: {tail(files[0] + '.err')}")
            bad = [i for i, q in enumerate(procs) if q.returncode != 0]
            if bad:
                raise RuntimeError(f"{key}: peer {bad[0]} exited {procs[bad[0]].returncode}: "
                                   f"{tail(files[bad[0]] + '.err')}")
            return [last_json(f + ".out") for f in files], files
        finally:
            for q in procs:
                reap(q)
            reap(master, term_first=True)

    def alone(self, lab, seed, steps, warmup_steps):
        """The same PEERS peers on the same namespaces, each training alone (sync disabled), together."""
        self.seq += 1
        procs, files = [], []
        try:
            for i in range(PEERS):
                out = os.path.join(self.tmp, f"{self.seq:03d}-nosync-s{seed}-p{i}")
                files.append(out)
                flags = common_flags(self.p, seed, steps, out)
                flags[flags.index("--val-every") + 1] = str(10 ** 9)
                flags[flags.index("--val-batches") + 1] = "1"
                cmd = lab.exec_prefix(i) + [self.trainer, *flags, "--bench-warmup", str(warmup_steps)]
                procs.append(spawn(cmd, out + ".out", out + ".err"))
            if not wait_all(procs, time.monotonic() + 1800):
                raise RuntimeError(f"no-sync peers timed out: {tail(files[0] + '.err')}")
            bad = [i for i, q in enumerate(procs) if q.returncode != 0]
            if bad:
                raise RuntimeError(f"no-sync peer {bad[0]} failed: {tail(files[bad[0]] + '.err')}")
            return [last_json(f + ".out") for f in files]
        finally:
            for q in procs:
                reap(q)
