"""M = 2 nodes x N = 2 ranks on CPU (FSDP2 over gloo inside a node) train a small transformer
with DiLoCo and with Streaming DiLoCo through examples/python: every rail bit-identical after each
outer step, and within 1e-5 relative of the single-process reference after 5 outer steps."""
import collections
import json
import os
import signal
import subprocess
import sys

import pytest
import torch

import diloco_reference as ref

# Inner SGD with momentum: AdamW's normalisation would amplify the last-bit differences between
# FSDP's sharded gradient reduction and the reference's full-batch gradient (4e-5 relative after
# 5 outer steps here), which says nothing about the outer algorithm under test.
NODES, RANKS, PER_RANK, LR, INNER = 2, 2, 2, 0.05, "sgd"


def launch(tmp_path, *args, timeout=600):
    cmd = [sys.executable, os.path.join(ref.EXAMPLES, "launch_local.py"), "--nodes", str(NODES), "--ranks",
           str(RANKS), "--", "--per-rank-batch", str(PER_RANK), "--lr", str(LR), "--inner", INNER, *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)  # the launcher and every rank it started
            p.wait()
    return p.returncode, out


def read_logs(tmp_path):
    by_rail_step = collections.defaultdict(dict)
    for name in os.listdir(tmp_path):
        if name.startswith("log-"):
            for line in open(tmp_path / name):
                r = json.loads(line)
                by_rail_step[(r["rail"], r["step"])][r["node"]] = json.dumps([r["engine_hash"], r["shard_hash"]])
    return by_rail_step


@pytest.mark.parametrize("H,fragments", [(5, 1), (6, 2)], ids=["diloco", "streaming"])
def test_nodes_of_fsdp_ranks_match_the_reference(tmp_path, H, fragments):
    outer = 5
    rc, out = launch(tmp_path, "--H", str(H), "--fragments", str(fragments), "--outer-steps", str(outer),
                     "--outer-log", str(tmp_path / "log-{node}-{rail}.jsonl"),
                     "--dump", str(tmp_path / "shard-{node}-{rail}.pt"))
    assert rc == 0, out
    logs = read_logs(tmp_path)
    syncs = {step for (_, step) in logs}
    assert len(syncs) >= outer, logs
    for (rail, step), nodes in logs.items():
        assert len(nodes) == NODES and len(set(nodes.values())) == 1, f"rail {rail} differs at step {step}: {nodes}"

    ex = ref.load_example()
    steps = outer * H + (fragments - 1) * (H // fragments)
    want = ref.run(ex, NODES, RANKS, H, fragments, steps, PER_RANK, LR, INNER)
    names = [n for n, _ in ex.make_model().named_parameters()]
    for m in range(NODES):
        shards = [torch.load(tmp_path / f"shard-node{m}-{r}.pt") for r in range(RANKS)]
        got = [torch.cat([s[n] for s in shards]) for n in names]
        err = ref.relative_error(got, want[m])
        assert err <= 1e-5, f"node {m}: relative error {err:.3g} against the reference"
