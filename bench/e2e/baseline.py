"""`--baseline REV` for the end-to-end benchmarks: build another revision beside this tree, then
measure the two builds in paired rounds within one run (bench/e2e/allreduce, link and state).

    baseline.add_arguments(parser)                    # --baseline, --baseline-rounds, --baseline-only
    baseline.check_arguments(parser, args)            # argparse errors (exit 2)
    base = baseline.prepare(args.baseline, TARGETS)   # or None without --baseline; exits 2 on an
                                                      # unknown REV, 1 when its build fails
    base.build_dir                                    # laid out like LONGHAUL_BUILD (build/release)
    result.update(baseline.compare(base, args.baseline_rounds, CONFIGS, log, UNIT, SETTINGS, measure=...))

The revision is exported with `git archive` into build/baseline/<sha>/src (build/ is ignored by
git) and built there with its own `release` preset (binaryDir build/baseline/<sha>/src/build/
release), tests off, only the targets the benchmark runs. A finished export and every finished
target are recorded, so a second run reuses them; a half-made export or build is redone. A lock
file keeps two benchmarks from building the same revision at once.

A paired round runs every configuration once on each build, alternating which build goes first
from one round to the next, so the machine's drift lands on both sides; a benchmark can interleave
the two builds' runs more finely within a round (`pair`). Throughputs are compared as current /
baseline: per configuration the median over the rounds of each round's ratio, and overall
(`ratio_vs_baseline`) the median over the rounds of each round's geometric mean across the
configurations. docs/allreduce_bench.md ("Against another revision") has the JSON fields.
"""
import fcntl
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MIN_ROUNDS = 5
MIN_RATIO = 0.97  # the no-regression target: current >= 0.97 x the baseline's throughput
SIDES = ("current", "baseline")


def add_arguments(parser):
    g = parser.add_argument_group("comparison with another revision")
    g.add_argument("--baseline", metavar="REV",
                   help="also build REV (any git revision) in build/baseline/<sha>/ and compare this build "
                        "with it in paired rounds: ratio_vs_baseline = current / baseline throughput")
    g.add_argument("--baseline-rounds", type=int, default=MIN_ROUNDS, metavar="N",
                   help=f"paired rounds of the comparison (default and minimum {MIN_ROUNDS})")
    g.add_argument("--baseline-only", action="store_true",
                   help="with --baseline: run only the paired comparison, not the rest of the benchmark")


def check_arguments(parser, args):
    if args.baseline is None:
        if args.baseline_only:
            parser.error("--baseline-only needs --baseline REV")
        return
    if args.baseline_rounds < MIN_ROUNDS:
        parser.error(f"--baseline-rounds {args.baseline_rounds}: ratio_vs_baseline is the median of at least "
                     f"{MIN_ROUNDS} paired rounds (issue 17); on this shared VM single rounds swing by +-15%")


def _git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)


def resolve(rev):
    """REV's full commit sha; a message and exit 2 when git does not know it as a commit here."""
    out = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if out.returncode != 0 or not out.stdout.strip():
        why = out.stderr.strip() or "not a commit in this repository's history"
        print(f"error: --baseline {rev}: unknown revision ({why})", file=sys.stderr)
        sys.exit(2)
    return out.stdout.strip()


def current_rev():
    """HEAD's sha, with '+dirty' when tracked files differ from it (what the current build is made of,
    as far as git can say)."""
    head = _git("rev-parse", "HEAD").stdout.strip() or None
    if head and _git("diff", "--quiet", "HEAD").returncode != 0:
        head += "+dirty"
    return head


class Baseline:
    def __init__(self, rev, sha, folder, build_dir, reused, build_s):
        self.rev = rev              # as given on the command line
        self.sha = sha
        self.folder = folder        # build/baseline/<sha>
        self.build_dir = build_dir  # the counterpart of LONGHAUL_BUILD
        self.reused = reused        # every target was already built
        self.build_s = build_s

    def describe(self):
        return {"dir": os.path.relpath(self.build_dir, ROOT), "reused": self.reused,
                "build_s": round(self.build_s, 1), "preset": "release (tests off)"}


def _log(msg):
    print(f"[baseline] {msg}", file=sys.stderr, flush=True)


def _run_logged(cmd, cwd, log_path, env=None):
    """Runs cmd in its own process group with its output appended to log_path. On any exception
    (Ctrl-C, SIGTERM turned into SystemExit) the whole group (cmake, ninja, the compilers) is killed
    before the exception goes on, so no compiler outlives the benchmark."""
    with open(log_path, "a") as logf:
        logf.write(f"$ {' '.join(cmd)}\n")
        logf.flush()
        p = subprocess.Popen(cmd, cwd=cwd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            return p.wait()
        except BaseException:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            raise


def _tail(path, n=3000):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def _export(sha, src):
    """git archive of sha into src, through a temporary folder renamed at the end: src exists only
    when complete."""
    if os.path.isfile(os.path.join(src, "CMakeLists.txt")):
        return
    tmp = tempfile.mkdtemp(prefix="src.partial-", dir=os.path.dirname(src))
    try:
        tar = os.path.join(tmp, "tree.tar")
        out = subprocess.run(["git", "-C", ROOT, "archive", "--format=tar", "-o", tar, sha],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"git archive {sha}: {out.stderr.strip()}")
        tree = os.path.join(tmp, "tree")
        os.mkdir(tree)
        subprocess.run(["tar", "-x", "-f", tar, "-C", tree], check=True, capture_output=True)
        os.rename(tree, src)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _configure(src, log_path, env):
    """The revision's own `release` preset (its binaryDir: src/build/release), tests off; a plain
    Release configuration where the revision has no such preset."""
    build_dir = os.path.join(src, "build", "release")
    if os.path.isfile(os.path.join(build_dir, "build.ninja")) or os.path.isfile(os.path.join(build_dir, "Makefile")):
        return build_dir
    off = ["-DLONGHAUL_TESTS=OFF", "-DLONGHAUL_FUZZ=OFF"]
    presets = os.path.join(src, "CMakePresets.json")
    if os.path.isfile(presets) and '"release"' in open(presets).read():
        cmd = ["cmake", "--preset", "release", *off]
    else:
        cmd = ["cmake", "-S", ".", "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", *off]
    if _run_logged(cmd, src, log_path, env) != 0:
        shutil.rmtree(build_dir, ignore_errors=True)  # configure again next time
        raise RuntimeError("cmake configure failed")
    return build_dir


def prepare(rev, targets):
    """Resolves, exports and builds rev (see the module's comment); None when rev is None."""
    if rev is None:
        return None
    sha = resolve(rev)
    folder = os.path.join(ROOT, "build", "baseline", sha)
    os.makedirs(folder, exist_ok=True)
    src = os.path.join(folder, "src")
    log_path = os.path.join(folder, "build.log")
    done_path = os.path.join(folder, "targets.done")
    t0 = time.monotonic()
    with open(os.path.join(folder, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process ends
        done = set(open(done_path).read().split()) if os.path.exists(done_path) else set()
        build_dir = os.path.join(src, "build", "release")
        if set(targets) <= done and os.path.isdir(build_dir):
            _log(f"{rev} = {sha[:12]}: reusing {os.path.relpath(build_dir, ROOT)} ({' '.join(targets)} built)")
            return Baseline(rev, sha, folder, build_dir, True, 0.0)
        _log(f"{rev} = {sha[:12]}: exporting and building {' '.join(targets)} in {os.path.relpath(folder, ROOT)} "
             f"(log: {os.path.relpath(log_path, ROOT)})")
        # ccache (where installed) sees paths relative to the export, so another revision's build
        # of the same files hits the cache.
        env = dict(os.environ, CCACHE_BASEDIR=src)
        try:
            _export(sha, src)
            build_dir = _configure(src, log_path, env)
            jobs = str(os.cpu_count() or 1)
            if _run_logged(["cmake", "--build", build_dir, "-j", jobs, "--target", *targets], src, log_path, env):
                raise RuntimeError("cmake --build failed")
        except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
            print(f"error: --baseline {rev}: building {sha[:12]} failed: {e}\n--- {log_path} (tail) ---\n"
                  f"{_tail(log_path)}", file=sys.stderr)
            sys.exit(1)
        with open(done_path + ".tmp", "w") as f:
            f.write("\n".join(sorted(done | set(targets))) + "\n")
        os.replace(done_path + ".tmp", done_path)
    build_s = time.monotonic() - t0
    _log(f"built {sha[:12]} in {build_s:.0f} s")
    return Baseline(rev, sha, folder, build_dir, False, build_s)


def geometric_mean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


MEASURE_ERRORS = (RuntimeError, OSError, ValueError, KeyError, subprocess.SubprocessError)


def compare(base, rounds, configs, log, unit, settings, measure=None, pair=None, batches=None):
    """The paired rounds and their JSON fields.

    configs: {name: description}. batches: lists of names measured together (default: each name
    alone), in the order they run. Each round measures every batch on both builds ("current":
    LONGHAUL_BUILD, "baseline": base's), the build that goes first alternating by round, with
    either
      measure(side, build_dir, names) -> {name: throughput}: one build's run of the batch, called
          for one build and then the other, back to back; or
      pair(order, builds, names) -> {side: {name: throughput}}: both builds' runs of the batch,
          order[0]'s first, interleaved as finely as the benchmark can (builds: {side: build_dir}).
    Throughputs are higher-is-better. A name missing from a result, or an exception, counts as
    that run failed (the message is kept). Processes the callables start are theirs to end. Only
    rounds in which every configuration ran on both builds count towards ratio_vs_baseline.
    """
    current_build = os.path.abspath(os.environ.get("LONGHAUL_BUILD", os.path.join(ROOT, "build", "release")))
    builds = {"current": current_build, "baseline": base.build_dir}
    names = list(configs)
    batches = batches or [[n] for n in names]
    got = {name: {side: [None] * rounds for side in SIDES} for name in names}
    errors, order = [], []
    t0 = time.monotonic()
    for r in range(rounds):
        sides = SIDES if r % 2 == 0 else SIDES[::-1]
        order.append(sides[0])
        for batch in batches:
            if pair:
                try:
                    results = pair(sides, builds, batch)
                except MEASURE_ERRORS as e:
                    results = {side: e for side in sides}
            else:
                results = {}
                for side in sides:
                    try:
                        results[side] = measure(side, builds[side], batch)
                    except MEASURE_ERRORS as e:
                        results[side] = e
            for side in sides:
                where = f"baseline round {r + 1}/{rounds}, {side}"
                values = results.get(side, RuntimeError("no result"))
                if isinstance(values, Exception):
                    errors.append({"round": r + 1, "side": side, "configs": batch, "error": str(values)[:500]})
                    log(f"{where}: {' '.join(batch)} FAILED: {values}")
                    continue
                for name in batch:
                    if values.get(name) is None:
                        errors.append({"round": r + 1, "side": side, "configs": [name], "error": "no result"})
                    else:
                        got[name][side][r] = values[name]
                log(f"{where}: " + ", ".join(f"{n} {values[n]:.3f}" for n in batch if values.get(n) is not None)
                    + f" {unit}")

    out = {"baseline_rev": base.sha, "baseline_rev_given": base.rev, "current_rev": current_rev(),
           "baseline_rounds": rounds, "baseline_configs": configs, "baseline_settings": settings,
           "baseline_unit": unit, "baseline_build": base.describe(),
           "baseline_first_per_round": order, "baseline_throughputs": {}}
    per_round = [[] for _ in range(rounds)]
    for name in names:
        cur, bas = got[name]["current"], got[name]["baseline"]
        ratios = [round(c / b, 4) if c is not None and b else None for c, b in zip(cur, bas)]
        out["baseline_throughputs"][name] = {"current": cur, "baseline": bas, "ratio": ratios}
        ok = [x for x in ratios if x is not None]
        out[f"ratio_vs_baseline_{name}"] = round(statistics.median(ok), 4) if ok else None
        for r, x in enumerate(ratios):
            per_round[r].append(x)
    round_means = [round(geometric_mean(xs), 4) if xs and None not in xs and min(xs) > 0 else None
                   for xs in per_round]
    complete = [x for x in round_means if x is not None]
    out["ratio_vs_baseline_rounds"] = round_means
    out["ratio_vs_baseline_complete_rounds"] = len(complete)
    # Fewer complete rounds than asked for: the figure is shown, but it does not count as met.
    out["ratio_vs_baseline"] = round(statistics.median(complete), 4) if complete else None
    out["ratio_vs_baseline_min_target"] = MIN_RATIO
    out["ratio_vs_baseline_met"] = (None if not complete else
                                    bool(len(complete) >= rounds and out["ratio_vs_baseline"] >= MIN_RATIO))
    if errors:
        out["baseline_errors"] = errors
    out["baseline_wall_s"] = round(time.monotonic() - t0, 1)
    log(f"ratio_vs_baseline {out['ratio_vs_baseline']} (rounds: {round_means}; "
        + ", ".join(f"{n} {out[f'ratio_vs_baseline_{n}']}" for n in names) + ")")
    return out
