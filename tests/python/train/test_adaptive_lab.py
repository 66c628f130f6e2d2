#!/usr/bin/env python3
"""The adaptive delay's mechanism on a real slow path (docs/overlap.md): a master and 2 peers, each
in a site of its own in the packet WAN lab (longhaul-wanem --site: namespaces, 50 ms one-way on
every path, 100 Mbit/s), train a tiny model with Streaming DiLoCo and --adaptive-delay. A ring
sync there takes at least two 50 ms hops, tens of the tiny model's steps, so the engine must
raise tau from the configured 1 to its bound, and:

- both peers show the same tau at every step (the group's choice, part of the agreed state);
- tau changes only at admission points (multiples of H), and reaches the bound;
- the steps each peer reported needing (tau_needed) exceeded the configured tau, which is why;
- rounds were applied (as many as the rounds files say), none dropped, and both peers end with
  one state hash.

It checks the mechanism, not a timing bound. Needs root and /dev/net/tun (exit 77: skipped).
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "e2e"))
import diloco_lab  # noqa: E402
from checks import Checks  # noqa: E402

SKIPPED = 77
PEERS = 2
H, FRAGMENTS, STALENESS, STEPS = 8, 2, 3, 48
FLAGS = ["--layers", "1", "--channels", "16", "--heads", "2", "--context", "16", "--batch", "4",
         "--warmup", "2", "--threads", "1", "--val-every", "1000", "--val-batches", "1",
         "--codec", "none", "--method", "streaming", "--sync-every", str(H), "--fragments",
         str(FRAGMENTS), "--delay", "1", "--adaptive-delay", "--max-staleness-steps", str(STALENESS),
         "--steps", str(STEPS), "--json", "--no-plot"]


def make_corpus(path):
    with open(path, "w") as f:
        for i in range(3000):
            f.write(f"peer {i % 7} sends round {i % 11} over the long haul.\n")


def start_master(args, lab, tmp):
    port_file = os.path.join(tmp, "master.port")
    proc = subprocess.Popen(lab.master_prefix() + [args.master, "--listen", f"{lab.master_addr()}:0",
                                                   "--port-file", port_file, "--log-level", "error"],
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while not (os.path.exists(port_file) and open(port_file).read().strip().isdigit()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError("longhaul-master did not start in the lab")
        time.sleep(0.05)
    time.sleep(0.05)  # the file may have been caught mid-write
    return proc, open(port_file).read().strip()


def run_group(args, lab, tmp):
    master, port = start_master(args, lab, tmp)
    dirs = [os.path.join(tmp, f"peer{i}") for i in range(PEERS)]
    peers = []
    try:
        for i in range(PEERS):
            peers.append(subprocess.Popen(
                lab.exec_prefix(i) + [args.trainer, "--master", f"{lab.master_addr()}:{port}",
                                      "--peers", str(PEERS), "--peer-index", str(i), "--listen",
                                      f"{lab.addr(i)}:0", "--data", args.corpus, "--out", dirs[i], *FLAGS],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=240) for p in peers]
    finally:
        for p in peers:
            if p.poll() is None:
                p.kill()
                p.wait()
        master.kill()
        master.wait()
    summaries = []
    for i, (p, (out, err)) in enumerate(zip(peers, outs)):
        if p.returncode != 0:
            raise RuntimeError(f"peer {i} exited {p.returncode}: {err[-2000:]}")
        summaries.append(json.loads(out.strip().splitlines()[-1]))
    return dirs, summaries


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def check_group(check, dirs, summaries):
    steps = [read(os.path.join(d, "timeline.csv")) for d in dirs]
    taus = [[int(r["tau"]) for r in rows] for rows in steps]
    needed = [int(r["tau_needed"]) for rows in steps for r in rows]
    check("one row per step on every peer", all(len(t) == STEPS for t in taus), str([len(t) for t in taus]))
    check("every peer shows the same tau at every step", all(t == taus[0] for t in taus), str(taus))
    changes = [int(steps[0][i]["step"]) for i in range(1, len(taus[0])) if taus[0][i] != taus[0][i - 1]]
    check("tau changes only at admission points (multiples of H)", all(s % H == 0 for s in changes),
          f"changes at steps {changes}")
    check("tau starts at the configured 1", taus[0][0] == 1, str(taus[0][:H]))
    check(f"tau reaches its bound {STALENESS}", max(taus[0]) == STALENESS, str(taus[0]))
    check("a peer needed more than the configured tau", max(needed) > 1, str(needed))
    print(f"     tau per step: {' '.join(map(str, taus[0]))}; changes at {changes}")
    applied = [s["rounds_applied"] for s in summaries]
    rounds = [sum(1 for r in read(os.path.join(d, "timeline_rounds.csv")) if r["applied"] == "1") for d in dirs]
    check("rounds were applied, as many as the rounds files say", applied[0] > 0 and applied == rounds,
          f"applied {applied}, rounds files {rounds}")
    check("no round was dropped", all(s["rounds_dropped"] == 0 for s in summaries),
          str([s["rounds_dropped"] for s in summaries]))
    check("both peers end with one state", len({s["state_hash"] for s in summaries}) == 1,
          str([s["state_hash"] for s in summaries]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--wanem", required=True)
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.exists("/dev/net/tun"):
        print("skipped: the packet lab needs root and /dev/net/tun")
        return SKIPPED
    check = Checks()
    lab = diloco_lab.make("wanlab", PEERS, "100mbit", 50, wanem_binary=args.wanem)
    try:
        lab.up()
        with tempfile.TemporaryDirectory(prefix="lh-adaptive-lab-") as tmp:
            args.corpus = os.path.join(tmp, "corpus.txt")
            make_corpus(args.corpus)
            dirs, summaries = run_group(args, lab, tmp)
            check_group(check, dirs, summaries)
    finally:
        lab.down()
    print(f"{len(check.failures)} failed: {check.failures}" if check.failures
          else "all adaptive-delay checks passed")
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
