"""Nodes as failure units from Python (issue 22): 2 nodes x 2 ranks of examples/python's FSDP2 +
DiLoCo trainer, real processes, a master in this process.

- A whole node SIGKILLed and restarted under the same name rejoins and catches up: the other node
  goes on alone meanwhile, and the restarted node's engine reaches the survivor's state.
- Rank 1 of a node SIGKILLed while training (rank 0 is in, or about to enter, one of FSDP's
  intra-node collectives, which would wait for rank 1 forever): rank 0 is released (it exits with
  status 4 and says why) within the master's heartbeat bound + 1 s, and the other node goes on.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import longhaul as lh
import diloco_reference as ref

sys.path.insert(0, ref.EXAMPLES)
from launch_local import free_port  # noqa: E402 - the launcher's port for each node's store

HEARTBEAT_MS, MISSES = 250, 4  # the master's failure bound: 1 s
H = 3
ENDLESS = 100_000  # outer steps: the survivors train until the test ends them


class Node:
    """The N rank processes of one node, with torchrun's environment (launch_local.py's)."""

    def __init__(self, master, name, index, logdir, outer_steps, ranks=2):
        port = free_port()
        self.name = name
        self.logs = [os.path.join(logdir, f"log-{name}-{r}-{time.monotonic_ns()}.jsonl") for r in range(ranks)]
        self.errs = [log + ".err" for log in self.logs]
        self.procs = []
        for r in range(ranks):
            env = dict(os.environ, LOCAL_RANK=str(r), RANK=str(r), LOCAL_WORLD_SIZE=str(ranks),
                       WORLD_SIZE=str(ranks), GROUP_RANK=str(index), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            cmd = [sys.executable, os.path.join(ref.EXAMPLES, "train_fsdp_diloco.py"), "--longhaul-master", master,
                   "--node-name", name, "--node-index", str(index), "--nodes", "2", "--H", str(H), "--inner", "sgd",
                   "--lr", "0.05", "--outer-steps", str(outer_steps), "--outer-log", self.logs[r]]
            with open(self.errs[r], "w") as err:
                self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env))

    def records(self, rank):
        if not os.path.exists(self.logs[rank]):
            return []
        with open(self.logs[rank]) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]

    def stderr(self, rank):
        with open(self.errs[rank]) as f:
            return f.read()[-2000:]

    def kill(self, ranks=None):
        for r in ranks if ranks is not None else range(len(self.procs)):
            if self.procs[r].poll() is None:
                self.procs[r].send_signal(signal.SIGKILL)
            self.procs[r].wait()


def wait_until(what, predicate, timeout):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def cluster(tmp_path):
    """A master with a 1 s failure bound; every node started is SIGKILLed at the end, pass or fail."""
    nodes = []
    with lh.Master(heartbeat_interval_ms=HEARTBEAT_MS, heartbeat_misses=MISSES) as m:
        def start(name, index, outer_steps=ENDLESS):
            nodes.append(Node(m.address, name, index, str(tmp_path), outer_steps))
            return nodes[-1]
        try:
            yield start
        finally:
            for n in nodes:
                n.kill()


def test_a_whole_node_killed_and_restarted_rejoins_and_catches_up(cluster):
    a, b = cluster("node0", 0), cluster("node1", 1)
    wait_until("both nodes' first outer steps", lambda: b.records(0) and b.records(1), 180)
    b.kill()
    seen = len(a.records(0))
    wait_until("the survivor's outer steps alone", lambda: len(a.records(0)) >= seen + 2, 60)
    assert all(p.poll() is None for p in a.procs), a.stderr(0)

    again = cluster("node1", 1, outer_steps=4)
    codes = [p.wait(timeout=180) for p in again.procs]
    assert codes == [0, 0], "\n".join(f"rank {r}: exit {c}\n{again.stderr(r)}" for r, c in enumerate(codes))
    for rail in range(2):
        theirs = {rec["engine_hash"] for rec in again.records(rail)}
        ours = {rec["engine_hash"] for rec in a.records(rail)}
        assert theirs & ours, f"rail {rail}: the restarted node never reached the survivor's state"
    assert all(p.poll() is None for p in a.procs), "the survivor went on training"


def test_a_dead_rank_releases_its_node_sibling_and_the_other_node_goes_on(cluster):
    a, b = cluster("node0", 0), cluster("node1", 1)
    wait_until("both nodes' first outer steps", lambda: b.records(0) and a.records(0), 180)
    b.kill(ranks=[1])
    killed = time.monotonic()
    wait_until("rank 0 of the dead rank's node to be released", lambda: b.procs[0].poll() is not None,
               HEARTBEAT_MS * MISSES / 1000 + 1 + 5)
    released_s = time.monotonic() - killed
    assert b.procs[0].returncode == 4, b.stderr(0)
    assert "evicted" in b.stderr(0)
    # The bound: the master's failure detection + 1 s (the extra 5 s above only keep a slow
    # machine from turning a violation into a hang; this is the check).
    assert released_s <= HEARTBEAT_MS * MISSES / 1000 + 1, f"released after {released_s:.2f} s"
    seen = len(a.records(0))
    wait_until("the other node's outer steps", lambda: len(a.records(0)) >= seen + 2, 60)
    assert all(p.poll() is None for p in a.procs), a.stderr(0)
