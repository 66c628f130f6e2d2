#!/usr/bin/env python3
"""Where a longhaul-train peer's time went: plot_timeline.py TIMELINE.csv OUT.png [--rounds R.csv]

Reads the timeline.csv a peer writes (a row per step: start_s, compute_s, blocked_s, tau, ...)
and, for the sync engine's methods, its timeline_rounds.csv (a row per round: launched_s,
ready_s, applied), and draws them against wall time: one lane of bars for compute, one for the
time blocked in the method's sync calls, one per fragment for each round's time on the network
(launch to result ready here, a mark where it was applied or dropped), and tau as a step line. A
step whose blocked bar is long while its fragment's network bar is still open is compute waiting
for the network; a network bar that ends before its apply mark is a round the overlap hid.
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

COMPUTE, BLOCKED, NETWORK, DROPPED = "tab:blue", "tab:red", "tab:green", "tab:gray"


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def number(text):
    return float(text) if text not in ("", None) else None


def continue_resumed(steps, rounds):
    """A resumed run appends rows whose clock starts again at 0: shift each resumed part (and the
    rounds settled in it) to start where the part before it ended."""
    offset, end, shift_from = 0.0, 0.0, []  # shift_from: (first step, offset)
    for r in steps:
        start = float(r["start_s"])
        if start + offset < end - 1e-9:
            offset = end
            shift_from.append((int(r["step"]), offset))
        r["start_s"] = str(start + offset)
        end = float(r["start_s"]) + float(r["compute_s"]) + float(r["blocked_s"])
    for r in rounds:
        shift = 0.0
        for first, off in shift_from:
            if int(r["settle_step"]) >= first:
                shift = off
        for key in ("launched_s", "ready_s"):
            if r[key] != "":
                r[key] = str(float(r[key]) + shift)


def draw_steps(ax, steps, lane):
    starts = [float(r["start_s"]) for r in steps]
    compute = [float(r["compute_s"]) for r in steps]
    blocked = [float(r["blocked_s"]) for r in steps]
    # Within a step the trainer computes first and then calls the method (data-parallel training
    # waits inside its step, but its wait is drawn after the compute all the same).
    ax.broken_barh(list(zip(starts, compute)), (lane["compute"] - 0.4, 0.8), color=COMPUTE)
    ax.broken_barh([(s + c, b) for s, c, b in zip(starts, compute, blocked)],
                   (lane["blocked"] - 0.4, 0.8), color=BLOCKED)
    wall = sum(compute) + sum(blocked)
    return sum(blocked) / wall if wall > 0 else 0.0


def draw_rounds(ax, rounds, steps, lane):
    """Each round's time on the network, and where its step settled it."""
    step_end = {int(r["step"]): float(r["start_s"]) + float(r["compute_s"]) + float(r["blocked_s"])
                for r in steps}
    for r in rounds:
        y = lane[f"f{r['fragment']}"]
        launched, ready = number(r["launched_s"]), number(r["ready_s"])
        applied = r["applied"] == "1"
        if launched is not None and ready is not None:
            ax.broken_barh([(launched, max(ready - launched, 1e-4))], (y - 0.3, 0.6),
                           color=NETWORK if applied else DROPPED)
        settled_at = step_end.get(int(r["settle_step"]))
        if settled_at is not None:
            ax.plot(settled_at, y, marker="v" if applied else "x", ms=5,
                    color="black" if applied else DROPPED)


def draw_tau(ax, steps):
    """tau in effect after each step, and the steps the slowest peer needed (why tau moved)."""
    rows = [r for r in steps if r["tau"] != ""]
    starts = [float(r["start_s"]) for r in rows]
    taus = [int(r["tau"]) for r in rows]
    needed = [int(r["tau_needed"]) if r["tau_needed"] not in ("", "0") else None for r in rows]
    ax.step(starts, taus, where="post", color="tab:purple", lw=1.5, label="tau in effect")
    ax.step(starts, [n if n is not None else float("nan") for n in needed], where="post",
            color="tab:orange", lw=1, ls="--", label="steps the slowest peer needed")
    ax.set_ylabel("steps")
    ax.set_ylim(0, max(taus + [n for n in needed if n is not None]) + 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    return taus


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--rounds", help="timeline_rounds.csv (the sync engine's methods)")
    args = ap.parse_args()
    steps = read_rows(args.csv)
    if not steps:
        raise SystemExit(f"{args.csv} has no steps")
    fragments = [c for c in steps[0].keys() if c.startswith("f") and c[1:].isdigit()]
    rounds = read_rows(args.rounds) if args.rounds else []
    continue_resumed(steps, rounds)
    names = ["compute", "blocked"] + fragments
    lane = {name: len(names) - i for i, name in enumerate(names)}  # compute on top
    engine = any(r["tau"] != "" for r in steps)

    height = 1.5 + 0.5 * len(names) + (1.5 if engine else 0)
    fig, axes = plt.subplots(2 if engine else 1, 1, figsize=(12, height), dpi=100, sharex=True,
                             squeeze=False,
                             gridspec_kw={"height_ratios": [len(names), 2] if engine else [1]})
    ax = axes[0][0]
    blocked_share = draw_steps(ax, steps, lane)
    draw_rounds(ax, rounds, steps, lane)
    ax.set_yticks([lane[n] for n in names])
    ax.set_yticklabels(["compute", "blocked"] + [f"{f} network" for f in fragments])
    ax.set_ylim(-0.1 if engine else 0.4, len(names) + 0.6)  # room for the legend below
    ax.grid(axis="x", alpha=0.3)
    title = f"{len(steps)} steps, blocked {100 * blocked_share:.1f}% of the steps' time"
    if engine:
        ax.legend(handles=[
            Patch(color=NETWORK, label="round on the network (launch to result ready here)"),
            Patch(color=DROPPED, label="dropped round"),
            Line2D([], [], color="black", marker="v", ls="", label="applied"),
            Line2D([], [], color=DROPPED, marker="x", ls="", label="dropped"),
        ], loc="lower right", fontsize="x-small", ncol=4)
        taus = draw_tau(axes[1][0], steps)
        title += f", tau {taus[0]} -> {taus[-1]} (max {max(taus)})"
    else:
        title += " (data-parallel: no rounds, blocked is the all-reduce)"
    axes[-1][0].set_xlabel("wall time since the run's start (s)")
    ax.set_title(f"longhaul-train peer timeline: {title}")
    fig.tight_layout()
    fig.savefig(args.png)


if __name__ == "__main__":
    main()
