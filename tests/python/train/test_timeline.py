#!/usr/bin/env python3
"""longhaul-train's per-peer timeline (docs/trainer.md, "Timeline"), end to end: a master and 2
peers on 127.0.0.1 train a tiny model for a few steps per method, and each peer's timeline.csv and
timeline_rounds.csv must agree with the schedule and with the peer's own --json summary:

- one row per step, in order, the header's columns in every row; blocked <= the step's wall time
  (compute >= 0); the steps follow each other in time; their blocked time adds up to at most the
  engine's blocked_s (which also counts the close);
- with the sync engine: fragment f launches ("L") exactly at the schedule's steps k*H + f*(H/F),
  and applies ("A") each round tau steps later (tau the column's value at its launch: the round
  keeps the tau it was launched with; CO2: H steps later, where the next round launches), or at
  the close for the last; the rounds file has one row
  per round with launched <= ready and as many applied rows as rounds_applied; both peers show
  the same tau at every step (the group's);
- data-parallel training has no tau, no fragments and no rounds file;
- timeline.png is a PNG when matplotlib is present.
Exits non-zero on any failure.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

from checks import Checks

TINY = ["--layers", "1", "--channels", "16", "--heads", "2", "--context", "16", "--batch", "4",
        "--warmup", "2", "--threads", "1", "--val-every", "1000", "--val-batches", "1",
        "--codec", "none"]
# name: (steps, flags, H, F); CO2 applies each round H steps after its launch, the others tau.
CASES = {
    "streaming_adaptive": (14, ["--method", "streaming", "--sync-every", "4", "--fragments", "2",
                                "--delay", "1", "--adaptive-delay", "--max-staleness-steps", "2"],
                           4, 2),
    "diloco": (9, ["--method", "diloco", "--sync-every", "3"], 3, 1),
    "co2": (9, ["--method", "co2", "--sync-every", "3"], 3, 1),
    "dp": (5, ["--method", "dp"], None, None),
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_corpus(path):
    with open(path, "w") as f:
        for i in range(3000):
            f.write(f"peer {i % 7} sends round {i % 11} to the ring.\n")


def start_master(master, tmp, name):
    port_file = os.path.join(tmp, f"{name}.port")
    proc = subprocess.Popen([master, "--listen", "127.0.0.1:0", "--port-file", port_file,
                             "--log-level", "error"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not (os.path.exists(port_file) and open(port_file).read().strip().isdigit()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("longhaul-master did not start")
        time.sleep(0.05)
    return proc, open(port_file).read().strip()


def run_group(args, tmp, name, steps, flags):
    """Two peers of one group; their output directories and --json summaries."""
    master, port = start_master(args.master, tmp, name)
    dirs = [os.path.join(tmp, f"{name}-peer{i}") for i in range(2)]
    try:
        peers = [subprocess.Popen(
            [args.trainer, "--master", f"127.0.0.1:{port}", "--peers", "2", "--peer-index", str(i),
             "--listen", "127.0.0.1:0", "--data", args.corpus, "--steps", str(steps), "--out",
             dirs[i], "--json", *TINY, *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
        outs = [p.communicate(timeout=240) for p in peers]
    finally:
        master.kill()
        master.wait()
    summaries = []
    for i, (p, (out, err)) in enumerate(zip(peers, outs)):
        if p.returncode != 0:
            raise RuntimeError(f"{name} peer {i} exited {p.returncode}: {err[-2000:]}")
        summaries.append(json.loads(out.strip().splitlines()[-1]))
    return dirs, summaries


def read(path):
    with open(path) as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def check_steps(check, name, header, rows, steps, fragments, summary):
    want = ["step", "start_s", "compute_s", "blocked_s", "tau", "tau_needed"]
    want += [f"f{f}" for f in range(fragments or 0)]
    check(f"{name}: timeline.csv's columns", header == want, f"{header} != {want}")
    check(f"{name}: one row per step", [int(r["step"]) for r in rows] == list(range(1, steps + 1)),
          f"steps {[r['step'] for r in rows]}")
    check(f"{name}: every row has every column", all(None not in r.values() for r in rows))
    check(f"{name}: blocked <= the step's wall time",
          all(float(r["compute_s"]) >= -1e-6 and float(r["blocked_s"]) >= 0 for r in rows))
    ends = [float(r["start_s"]) + float(r["compute_s"]) + float(r["blocked_s"]) for r in rows]
    check(f"{name}: the steps follow each other",
          all(ends[i] <= float(rows[i + 1]["start_s"]) + 1e-5 for i in range(len(rows) - 1)))
    blocked = sum(float(r["blocked_s"]) for r in rows)
    check(f"{name}: the steps' blocked time is within the engine's ({blocked:.4f} s <= "
          f"{summary['blocked_s']:.4f} s)", blocked <= summary["blocked_s"] + 1e-3)


def lag(name, rows, h, step):
    """The steps from a round's launch at `step` to its outer update."""
    return h if name.startswith("co2") else int(rows[step - 1]["tau"])


def expected_events(name, rows, steps, h, fragments):
    """The letters the schedule puts in each fragment's column: launches at k*H + f*(H/F), each
    applied its lag later, or at the close."""
    launches, applies, closes = {}, {}, []
    for f in range(fragments):
        step = h + f * (h // fragments)
        while step <= steps:
            tau = lag(name, rows, h, step)
            launches.setdefault(f, []).append(step)
            if step + tau <= steps:
                applies.setdefault(f, []).append(step + tau)
            else:
                closes.append(f)
            step += h
    return launches, applies, closes


def check_engine(check, name, rows, rounds, steps, h, fragments, summary):
    launches, applies, closes = expected_events(name, rows, steps, h, fragments)
    for f in range(fragments):
        col = [r[f"f{f}"] for r in rows]
        got_l = [i + 1 for i, c in enumerate(col) if "L" in c]
        got_a = [i + 1 for i, c in enumerate(col) if "A" in c]
        check(f"{name}: f{f} launched at the schedule's steps {launches.get(f, [])}",
              got_l == launches.get(f, []), f"got {got_l}")
        check(f"{name}: f{f} applied at each launch + its lag {applies.get(f, [])}",
              got_a == applies.get(f, []), f"got {got_a}")
    applied = [r for r in rounds if r["applied"] == "1"]
    check(f"{name}: a rounds row per applied round ({summary['rounds_applied']})",
          len(applied) == summary["rounds_applied"] == len(rounds), f"{len(rounds)} rows")
    check(f"{name}: rounds launched before their result was ready",
          all(r["launched_s"] != "" and r["ready_s"] != ""
              and float(r["launched_s"]) <= float(r["ready_s"]) for r in rounds))
    by_launch = {(int(r["fragment"]), int(r["launch_step"])): int(r["settle_step"]) for r in rounds}
    want = {(f, s): s + lag(name, rows, h, s) for f, ss in launches.items() for s in ss
            if s + lag(name, rows, h, s) <= steps}
    want.update({(f, launches[f][-1]): steps for f in closes})
    check(f"{name}: each round settled at its launch + tau (or the close)", by_launch == want,
          f"{by_launch} != {want}")


def check_png(check, name, path):
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"skip {name}: no matplotlib, no timeline.png")
        return
    ok = os.path.exists(path) and open(path, "rb").read(8) == PNG_MAGIC
    check(f"{name}: timeline.png is a PNG", ok)


def check_case(check, name, steps, h, fragments, dirs, summaries):
    taus = []
    for i, (d, summary) in enumerate(zip(dirs, summaries)):
        label = f"{name} peer {i}"
        header, rows = read(os.path.join(d, "timeline.csv"))
        check_steps(check, label, header, rows, steps, fragments, summary)
        rounds_path = os.path.join(d, "timeline_rounds.csv")
        if fragments is None:
            check(f"{label}: no tau, no rounds file", all(r["tau"] == "" for r in rows)
                  and not os.path.exists(rounds_path))
        else:
            _, rounds = read(rounds_path)
            check_engine(check, label, rows, rounds, steps, h, fragments, summary)
            taus.append([r["tau"] for r in rows])
        check_png(check, label, os.path.join(d, "timeline.png"))
    if taus:
        check(f"{name}: both peers had the same tau at every step", taus[0] == taus[1],
              f"{taus}")
        print(f"     {name}: tau per step {' '.join(taus[0])}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--master", required=True)
    args = ap.parse_args()
    check = Checks()
    with tempfile.TemporaryDirectory(prefix="lh-timeline-") as tmp:
        args.corpus = os.path.join(tmp, "corpus.txt")
        make_corpus(args.corpus)
        for name, (steps, flags, h, fragments) in CASES.items():
            dirs, summaries = run_group(args, tmp, name, steps, flags)
            check_case(check, name, steps, h, fragments, dirs, summaries)
    print(f"{len(check.failures)} failed: {check.failures}" if check.failures
          else "all timeline checks passed")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
