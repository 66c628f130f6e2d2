"""What a user on a thin link gets: the wall time each method needs to reach one loss, derived
from two measurements that bench/run diloco-wan pairs up (docs/training.md, "Time to a loss"):

- the loss curve of theta_g against the step, from the latest bench/run diloco run on loopback
  (its log-<key>-s1.csv files: the validation loss every --val-every steps);
- the method's step time on the shaped link, from this run's throughput pass (the group's tokens
  per second over the tokens of one group step).

The target is a loss every method reaches: data-parallel's validation loss at a third of its
tokens (`time_to_loss_target`). A method's time is the first step at which its curve reaches the
target (linear between validation points) times its seconds per step on the link. The figures
are derived, not a run to the loss on the link, and labelled so.
"""
import csv
import os


def val_curve(path):
    """[(step, validation loss)] of a longhaul-train log.csv."""
    with open(path) as f:
        return [(int(r["step"]), float(r["val_loss"])) for r in csv.DictReader(f) if r["val_loss"]]


def loss_at(curve, step):
    """The curve at `step`, linear between its points (None outside them)."""
    for (s0, v0), (s1, v1) in zip(curve, curve[1:]):
        if s0 <= step <= s1:
            return v0 + (v1 - v0) * (step - s0) / (s1 - s0)
    return next((v for s, v in curve if s == step), None)


def steps_to(curve, target):
    """The first step (fractional, linear between points) at which the curve reaches `target`."""
    prev = (0, None)
    for s, v in curve:
        if v <= target:
            if prev[1] is None or prev[1] == v:
                return float(s)
            return prev[0] + (s - prev[0]) * (prev[1] - target) / (prev[1] - v)
        prev = (s, v)
    return None


def derive(loss_dir, loss_result, shaped, rates, tokens_per_group_step):
    """{time_to_loss_<rate>_<key>, time_to_loss_target, time_to_loss_<rate>_dp_over_best, ...}
    and the curves against wall time for the plot."""
    curves = {}
    for key in loss_result.get("methods", {}):
        path = os.path.join(loss_dir, f"log-{key}-s1.csv")
        if os.path.exists(path):
            curves[key] = val_curve(path)
    steps = loss_result["protocol"]["steps"]
    if "dp" not in curves:
        return {"time_to_loss_error": f"no data-parallel curve in {loss_dir}"}, {}
    target = loss_at(curves["dp"], steps / 3)
    out = {"time_to_loss_target": round(target, 5) if target else None,
           "time_to_loss_target_rule": f"data-parallel's validation loss at step {steps / 3:g} of {steps}",
           "time_to_loss_derived_from": os.path.relpath(loss_dir), "time_to_loss_kind": "derived"}
    walls = {}
    for rate in rates:
        lab = shaped.get(rate) or {}
        times = {}
        for key, r in lab.items():
            if not isinstance(r, dict) or "tokens_per_s_sum" not in r or key not in curves:
                continue
            step_s = tokens_per_group_step / r["tokens_per_s_sum"]
            n = steps_to(curves[key], target) if target else None
            times[key] = n * step_s if n is not None else None
            out[f"time_to_loss_{rate}_{key}"] = round(times[key], 1) if times[key] is not None else None
            out[f"step_s_{rate}_{key}"] = round(step_s, 4)
            out[f"steps_to_loss_{key}"] = round(n, 1) if n is not None else None
            walls.setdefault(rate, {})[key] = [(s * step_s, v) for s, v in curves[key]]
        others = [t for k, t in times.items() if k != "dp" and t is not None]
        if times.get("dp") is not None and others:
            best = min(others)
            out[f"time_to_loss_{rate}_dp_over_best"] = round(times["dp"] / best, 3)
            out[f"time_to_loss_{rate}_best"] = min((t, k) for k, t in times.items()
                                                   if k != "dp" and t is not None)[1]
    return out, walls


def plot(walls, target, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(walls), figsize=(6.5 * len(walls), 4.5), dpi=100, squeeze=False)
    for ax, (rate, per_key) in zip(axes[0], walls.items()):
        for key, pts in per_key.items():
            ax.plot([t / 60 for t, _ in pts], [v for _, v in pts], marker="o", markersize=3, label=key)
        if target:
            ax.axhline(target, color="gray", linestyle="--", linewidth=1, label="target")
        ax.set_xscale("log")
        ax.set_title(f"{rate}, 50 ms one-way (derived)")
        ax.set_xlabel("wall time (minutes, log)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("validation loss of theta_g (nats/byte)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
