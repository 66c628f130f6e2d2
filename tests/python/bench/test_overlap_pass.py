#!/usr/bin/env python3
"""bench/run diloco-wan's nonblocked_<rate> (bench/e2e/overlap_pass.py) on made-up passes: an
adaptive pass's tau and blocked fraction come from the steps after its first two cycles; the
fixed-tau twin of an adaptive method drops the adaptive flags; the best method is the least
blocked one whose loss qualifies, and a better-blocked one that does not qualify is passed over."""
import csv
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "e2e"))
import diloco_runs  # noqa: E402
import overlap_pass  # noqa: E402


def write_timeline(d, rows):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "timeline.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "start_s", "compute_s", "blocked_s", "tau", "tau_needed", "f0"])
        for step, compute, blocked, tau in rows:
            w.writerow([step, 0, compute, blocked, tau, tau, ""])


def check_adaptive_figures():
    h = 10
    # Cycles 1-2 (steps 1-20) at tau 1 and badly blocked; then tau 3, blocked 0.1 s of 1 s; the
    # last step (settles and validates) blocked for long and left out.
    rows = [(s, 0.5, 0.5, 1) for s in range(1, 21)] + [(s, 0.9, 0.1, 3) for s in range(21, 40)]
    rows.append((40, 0.9, 5.0, 3))
    with tempfile.TemporaryDirectory() as d:
        dirs = [os.path.join(d, f"p{i}") for i in range(2)]
        for x in dirs:
            write_timeline(x, rows)
        fig = overlap_pass.adaptive_figures(dirs, h)
    assert fig["tau_settled_max"] == 3, fig
    assert fig["tau_last"] == 3, fig
    assert fig["tau_per_step_counts"] == {"1": 20, "3": 20}, fig
    assert abs(fig["blocked_fraction_settled"] - 0.1) < 1e-9, fig
    assert fig["settled_from_step"] == 21, fig


def check_fixed_tau_key():
    key = overlap_pass.fixed_tau_key("streaming_u8_adaptive", 4)
    flags, h = diloco_runs.METHODS[key]
    assert "--adaptive-delay" not in flags and "--max-staleness-steps" not in flags, flags
    assert flags.count("--delay") == 1 and flags[flags.index("--delay") + 1] == "4", flags
    assert flags[flags.index("--codec") + 1] == "u8" and h == 50, (flags, h)


class TableQualifier:
    """Judges by a table of losses (the real one measures them on loopback)."""

    def __init__(self, losses):
        self.losses, self.runs, self.asked = losses, {}, []

    def judge(self, key, tau):
        self.asked.append((key, tau))
        loss, base = self.losses[(key, tau)], 2.0
        return {"loss": loss, "loss_source": "table", "baseline": overlap_pass.BASELINE[key],
                "baseline_loss": base, "baseline_source": "table", "loss_vs_diloco_f32": loss / base,
                "qualifies": loss / base <= overlap_pass.LOSS_BOUND}


def check_best_method():
    p = {"h_scale": 1.0}
    lab = {"nosync": [{"tokens_per_s": 1000.0}],
           "dp": {"tokens_per_s_sum": 100.0, "blocked_fraction": 0.9},
           "diloco_h100_u8": {"tokens_per_s_sum": 900.0, "blocked_fraction": 0.1},
           "streaming_adaptive": {"tokens_per_s_sum": 990.0, "blocked_fraction": 0.5,
                                  "overlap": {"blocked_fraction_settled": 0.01, "tau_settled_max": 9}},
           "streaming_u8_adaptive": {"tokens_per_s_sum": 970.0, "blocked_fraction": 0.4,
                                     "overlap": {"blocked_fraction_settled": 0.03, "tau_settled_max": 3}}}
    q = TableQualifier({("streaming_adaptive", 9): 2.10, ("streaming_u8_adaptive", 3): 2.03,
                        ("diloco_h100_u8", 0): 2.0})
    out = overlap_pass.fields({"10mbit": lab}, ["10mbit"], q, p)
    # f32 at tau 9 is least blocked but 5% worse: passed over; u8 at tau 3 qualifies; DiLoCo is
    # never asked (more blocked than the first that qualified).
    assert q.asked == [("streaming_adaptive", 9), ("streaming_u8_adaptive", 3)], q.asked
    assert out["nonblocked_10mbit_method"] == "streaming_u8_adaptive", out
    assert abs(out["nonblocked_10mbit"] - 0.97) < 1e-9 and out["nonblocked_10mbit_tau"] == 3, out
    assert out["nonblocked_10mbit_met"] is True, out
    assert abs(out["nonblocked_10mbit_cu"] - 0.97) < 1e-9, out
    assert out["nonblocked_10mbit_loss_vs_diloco_f32"] == [2.03 / 2.0, 2.03, 2.0], out
    # Nothing qualifies: no figure, and not met.
    q = TableQualifier({("streaming_adaptive", 9): 2.5, ("streaming_u8_adaptive", 3): 2.5,
                        ("diloco_h100_u8", 0): 2.5})
    out = overlap_pass.fields({"10mbit": lab}, ["10mbit"], q, p)
    assert out["nonblocked_10mbit"] is None and out["nonblocked_10mbit_met"] is False, out
    assert len(out["nonblocked_candidates"]["10mbit"]) == 3, out


def main():
    check_adaptive_figures()
    check_fixed_tau_key()
    check_best_method()
    print("ok")


if __name__ == "__main__":
    main()
