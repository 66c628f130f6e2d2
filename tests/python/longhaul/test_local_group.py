"""Node-local groups from Python (issue 29): two nodes of two rank processes each all-reduce torch
tensors through longhaul.LocalGroup (shared memory inside the node, one ring per rail between the
nodes), against a master in this process; every result is checked exactly."""
import json
import os
import subprocess
import sys

import longhaul as lh

RANK = os.path.join(os.path.dirname(__file__), "local_group_rank.py")


def test_two_nodes_of_two_ranks_reduce_torch_tensors_exactly():
    nodes, rails, steps = 2, 2, 3
    with lh.Master() as m:
        procs = [subprocess.Popen([sys.executable, RANK, m.address, f"n{k}", str(k), str(r), str(rails),
                                   str(steps)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for k in range(nodes) for r in range(rails)]
        try:
            outs = [p.communicate(timeout=120) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        records = [json.loads(line) for line in out.splitlines()]
        assert [r["step"] for r in records] == list(range(steps))
        for r in records:
            # sum over nodes k and rails q of (k+1)(q+1) + step, doubled at every 7th element
            base = sum((k + 1) * (q + 1) + r["step"] for k in range(nodes) for q in range(rails))
            assert r["values"] == [float(base), float(2 * base)]


def test_a_local_group_needs_its_siblings_and_says_which_never_came():
    with lh.Master() as m:
        comm = lh.Communicator(m.address, node="lonely", node_rail=0, node_rails=2)
        try:
            try:
                lh.LocalGroup(comm, timeout_ms=300)
            except lh.LonghaulError as e:
                assert e.status == "LH_ERR_TIMEOUT" and "rank(s) 1 missing" in str(e), str(e)
            else:
                raise AssertionError("a group of one rank out of two formed")
        finally:
            comm.close(None)


def test_an_nccl_group_without_a_gpu_says_why():
    """cuda_device= asks for NCCL local steps: a machine without a usable device (or NCCL) refuses
    with Unsupported, naming the reason, instead of falling back silently."""
    import torch
    if torch.cuda.is_available():
        import pytest
        pytest.skip("this machine has a CUDA device: test_cuda.py covers it")
    with lh.Master() as m:
        comm = lh.Communicator(m.address)
        try:
            try:
                lh.LocalGroup(comm, cuda_device=0)
            except lh.Unsupported as e:
                assert e.status == "LH_ERR_UNSUPPORTED" and ("CUDA" in str(e) or "NCCL" in str(e)), str(e)
            else:
                raise AssertionError("an NCCL local group formed without a GPU")
        finally:
            comm.close(None)
