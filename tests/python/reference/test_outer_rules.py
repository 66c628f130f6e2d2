#!/usr/bin/env python3
"""The benchmark's reference (bench/e2e/reference) against longhaul on a toy problem: a tiny GPT,
3 longhaul-train peers and a master on 127.0.0.1 per method, each dumping its parameters around
every sync of the first 5 rounds (--dump-dir).

1. The reference's initialisation equals longhaul-train's bit for bit, and its inner loop (data
   order, schedule, AdamW) gives every peer's training loss of the steps before the first sync to
   the 6 digits log.csv prints.
2. For every method (DiLoCo, Streaming with F = 2 and tau = 1, CO2 with and without its gap penalty
   and clipping, eager), the reference's outer rule fed with each round's pseudo-gradients formed
   from longhaul's peers reproduces longhaul's theta_g, and each peer's parameters after the merge
   or restart, to 1e-6 relative for 5 rounds and close().
3. The check can fail: the same dumps replayed with another outer momentum are rejected.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "e2e"))
from reference import corpus, methods, model, rounds  # noqa: E402

PEERS = 3
CFG = dict(layers=1, channels=32, heads=2, context=32, batch=2, warmup=2, seed=3)
H = 4
CASES = {  # name -> (longhaul-train flags, the reference's Spec)
    "diloco": (["--method", "diloco"], methods.Spec("diloco", H)),
    "streaming": (["--method", "streaming", "--fragments", "2", "--delay", "1"],
                  methods.Spec("diloco", H, fragments=2, tau=1)),
    "co2": (["--method", "co2"], methods.Spec("co2", H, lr=1.0, mu=0.2)),
    "co2_gap_clip": (["--method", "co2", "--co2-gap-penalty", "2", "--co2-clip", "0.001"],
                     methods.Spec("co2", H, lr=1.0, mu=0.2, gap_penalty=2.0, clip=0.001)),
    "eager": (["--method", "eager"], methods.Spec("eager", H)),
}


def run_group(args, tmp, name, flags, steps, dump_steps):
    port_file = os.path.join(tmp, f"{name}.port")
    master = subprocess.Popen([args.master, "--listen", "127.0.0.1:0", "--port-file", port_file,
                               "--log-level", "error"], stderr=subprocess.DEVNULL)
    peers = []
    try:
        deadline = time.monotonic() + 15
        while not (os.path.exists(port_file) and open(port_file).read().strip().isdigit()):
            if master.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("longhaul-master did not start")
            time.sleep(0.02)
        time.sleep(0.05)
        port = open(port_file).read().strip()
        dirs = []
        for i in range(PEERS):
            out = os.path.join(tmp, f"{name}-p{i}")
            dirs.append(out)
            cmd = [args.trainer, "--master", f"127.0.0.1:{port}", "--peers", str(PEERS),
                   "--peer-index", str(i), "--listen", "127.0.0.1:0", "--steps", str(steps),
                   "--batch", str(CFG["batch"]), "--warmup", str(CFG["warmup"]), "--threads", "1",
                   "--seed", str(CFG["seed"]), "--val-every", "1000", "--val-batches", "2",
                   "--layers", str(CFG["layers"]), "--channels", str(CFG["channels"]),
                   "--heads", str(CFG["heads"]), "--context", str(CFG["context"]), "--codec", "none",
                   "--sync-every", str(H), "--out", out, "--no-plot",
                   "--dump-dir", os.path.join(out, "dump"),
                   "--dump-steps", ",".join(map(str, dump_steps)), *flags]
            peers.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                          stderr=open(out + ".err", "w")))
        for i, p in enumerate(peers):
            if p.wait(timeout=120) != 0:
                raise RuntimeError(f"{name}: peer {i} exited {p.returncode}: "
                                   f"{open(dirs[i] + '.err').read()[-600:]}")
        return dirs
    finally:
        for p in peers + [master]:
            if p.poll() is None:
                p.kill()
                p.wait()


def check_inner_loop(dirs, cfg, data, failures):
    theta0 = model.initial_parameters(cfg)
    lh0 = rounds._load(os.path.join(dirs[0], "dump"), "init")
    same = bool((theta0 == lh0).all())
    print(f"{'ok  ' if same else 'FAIL'} initialisation bit-identical ({lh0.numel()} values)")
    if not same:
        failures.append("init")
    for m, d in enumerate(dirs):
        r = model.Replica(cfg, theta0)
        shard = data.shard(PEERS, m)
        logged = [float(row["train_loss"]) for row in csv.DictReader(open(os.path.join(d, "log.csv")))]
        for t in range(1, H + 1):
            ours = r.step(*corpus.train_batch(shard, cfg.batch, cfg.context, cfg.data_seed, t - 1))
            ok = abs(ours - logged[t - 1]) <= 1e-5 * abs(logged[t - 1]) + 5e-6
            if not ok:
                failures.append(f"loss peer {m} step {t}")
                print(f"FAIL peer {m} step {t}: reference {ours:.6f}, longhaul {logged[t - 1]:.6f}")
    print(f"ok   inner loop: {PEERS} peers x {H} steps of training loss as longhaul-train logged them"
          if not any(f.startswith("loss") for f in failures) else "FAIL inner loop")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--master", required=True)
    args = ap.parse_args()
    data = corpus.Corpus()
    failures = []
    with tempfile.TemporaryDirectory(prefix="lh-ref-rules-") as tmp:
        for name, (flags, spec) in CASES.items():
            steps = rounds.event_steps(spec, 5, 10 ** 6)
            last = steps[-1]
            cfg = model.Config(steps=last, **CFG)
            dirs = run_group(args, tmp, name, flags, last, steps)
            if name == "diloco":
                check_inner_loop(dirs, cfg, data, failures)
            dumps = [os.path.join(d, "dump") for d in dirs]
            r = rounds.check(dumps, spec, cfg, steps, with_close=True)
            print(f"{'ok  ' if r['ok'] else 'FAIL'} {name}: {r['rounds_applied']} rounds over "
                  f"{r['steps_compared']} steps + close; theta_g max rel diff "
                  f"{r['theta_g_max_rel_diff']:.3g}, local {r['local_max_rel_diff']:.3g} "
                  f"(tol {rounds.TOLERANCE})")
            if not r["ok"] or r["rounds_applied"] < 5:
                failures.append(name)
            if name == "diloco":
                wrong = methods.Spec("diloco", H, mu=0.8)
                bad = rounds.check(dumps, wrong, cfg, steps, with_close=True)
                print(f"{'ok  ' if not bad['ok'] else 'FAIL'} the check rejects momentum 0.8 for 0.9 "
                      f"(theta_g max rel diff {bad['theta_g_max_rel_diff']:.3g})")
                if bad["ok"]:
                    failures.append("negative control")
    print(f"{len(failures)} failed: {failures}" if failures else "all reference checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
