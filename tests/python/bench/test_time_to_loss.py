#!/usr/bin/env python3
"""bench/run diloco-wan's time to a loss (bench/e2e/time_to_loss.py), on made-up curves and step
times: the target is data-parallel's loss at a third of the steps, each method's time is its
first step at the target times its seconds per step on the link, and the ratio is DP's time over
the best other method's."""
import csv
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "e2e"))
import time_to_loss  # noqa: E402


def write_log(d, key, points):
    with open(os.path.join(d, f"log-{key}-s1.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "val_loss"])
        for s in range(1, 301):
            w.writerow([s, points.get(s, "")])


def near(x, y):
    return x is not None and abs(x - y) < 1e-6


def main():
    assert near(time_to_loss.loss_at([(100, 2.6), (200, 2.3)], 150), 2.45)
    assert near(time_to_loss.steps_to([(100, 2.6), (200, 2.3)], 2.45), 150)
    assert time_to_loss.steps_to([(100, 2.6), (200, 2.3)], 2.0) is None
    with tempfile.TemporaryDirectory() as d:
        write_log(d, "dp", {50: 2.8, 100: 2.5, 200: 2.2, 300: 2.0})
        write_log(d, "co2", {100: 2.7, 200: 2.5, 300: 2.3})
        write_log(d, "streaming", {100: 3.0, 200: 2.9, 300: 2.8})
        loss = {"methods": {"dp": {}, "co2": {}, "streaming": {}}, "protocol": {"steps": 300}}
        shaped = {"10mbit": {"dp": {"tokens_per_s_sum": 100.0}, "co2": {"tokens_per_s_sum": 1000.0},
                             "streaming": {"tokens_per_s_sum": 1000.0}}}
        out, walls = time_to_loss.derive(d, loss, shaped, ["10mbit"], 2000)
    assert near(out["time_to_loss_target"], 2.5), out
    assert near(out["time_to_loss_10mbit_dp"], 100 * 20.0), out    # 100 steps x 20 s
    assert near(out["time_to_loss_10mbit_co2"], 200 * 2.0), out    # 200 steps x 2 s
    assert out["time_to_loss_10mbit_streaming"] is None, out       # never reaches 2.5
    assert near(out["time_to_loss_10mbit_dp_over_best"], 5.0), out
    assert out["time_to_loss_10mbit_best"] == "co2", out
    assert walls["10mbit"]["co2"][0] == (200.0, 2.7), walls
    print("time to loss: ok")


if __name__ == "__main__":
    main()
