#!/usr/bin/env python3
"""The pure parts of bench/run diloco's shaped passes (bench/e2e/diloco_lab.py and the cu of
bench/e2e/diloco_report.py): where the master and peers sit in the WAN lab, the label the JSON
records, the pass sizing, and which no-sync runs a pass's cu divides by. No root, no network.
Exits non-zero on any failure."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../bench/e2e"))
import diloco_lab  # noqa: E402
import diloco_report  # noqa: E402


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(b))


def test_sites_and_labels():
    # The master first, so that peer i is site i + 1 (WanShaped.exec_prefix relies on it).
    assert diloco_lab.wanlab_sites(4) == ["m", "p0", "p1", "p2", "p3"]
    assert diloco_lab.rate_mbit("100mbit") == 100
    assert diloco_lab.rate_mbit("10mbit") == 10
    assert diloco_lab.shaping_label("wanlab", 50.0) == "wanlab 50ms one-way"
    assert diloco_lab.shaping_label("tbf", 0) == "tbf, no delay"


def test_sync_seconds():
    # Data-parallel's step at 10 Mbit/s: 6.35 MB on the wire plus 6 ring steps of 50 ms.
    assert close(diloco_lab.sync_seconds(6_350_000, 10e6, 50, 4), 5.08 + 0.3)
    assert diloco_lab.sync_seconds(0, 10e6, 50, 4) == 0  # no sync, no ring steps
    assert close(diloco_lab.sync_seconds(1_000_000, 100e6, 0, 4), 0.08)


def test_pass_steps():
    # 45 s at 0.3 s a step and no sync: 150 steps; whole rounds of H = 50.
    assert diloco_lab.pass_steps(45, 0.3, 0, None, 100e6, 50, 4) == 150
    assert diloco_lab.pass_steps(45, 0.3, 0, 50, 100e6, 50, 4) == 150
    assert diloco_lab.pass_steps(45, 0.3, 0, 100, 100e6, 50, 4) == 200  # 1.5 rounds round to 2
    # Data-parallel at 10 Mbit/s spends 5.4 s a step on the wire: the minimum of 8 steps.
    assert diloco_lab.pass_steps(45, 0.3, 6_350_000, None, 10e6, 50, 4) == 8
    # Never fewer than 2 rounds.
    assert diloco_lab.pass_steps(1, 0.3, 0, 100, 100e6, 50, 4) == 200


def test_reference_is_the_neighbouring_nosync_runs():
    lab = {"nosync": [{"tokens_per_s": 1000.0}, {"tokens_per_s": 3000.0}, {"error": "x"}],
           "dp": {"tokens_per_s_sum": 500.0, "nosync_ref_tokens_per_s": [1000.0, 3000.0]},
           "co2": {"tokens_per_s_sum": 1800.0, "nosync_ref_tokens_per_s": [3000.0, None]},
           "old": {"tokens_per_s_sum": 1000.0}}
    assert diloco_report.reference_tps(lab, "dp") == 2000.0
    assert diloco_report.reference_tps(lab, "co2") == 3000.0  # a failed neighbour is left out
    assert diloco_report.reference_tps(lab, "old") == 2000.0  # no neighbours: every run's mean
    assert diloco_report.shaped_cu(lab) == {"dp": 0.25, "co2": 0.6, "old": 0.5}


def main():
    tests = [v for k, v in sorted(globals().items()) if k.startswith("test_")]
    for t in tests:
        t()
        print(f"ok {t.__name__}")
    print(f"{len(tests)} passed")


if __name__ == "__main__":
    main()
