"""Reduce-scatter, all-gather, broadcast and barrier from Python: results by ring position,
the output written only on success, dtypes, and the errors of bad shapes."""
import numpy as np
import pytest
import torch

import longhaul as lh
from conftest import run_threads


def by_rank(pair):
    """The pair in ring order (counts and roots are by ring position)."""
    return sorted(pair, key=lambda c: c.rank)


def test_reduce_scatter_gives_each_member_its_part_of_the_sum(pair):
    comms = by_rank(pair)
    sends = [torch.arange(10, dtype=torch.float32) * (i + 1) for i in range(2)]
    outs = [torch.full((5,), -1.0) for _ in range(2)]
    res = run_threads(*[lambda c=c, s=s, o=o: c.reduce_scatter(s, o).wait(timeout=30)
                        for c, s, o in zip(comms, sends, outs)])
    total = torch.arange(10, dtype=torch.float32) * 3
    assert res[0] is outs[0]
    assert torch.equal(outs[0], total[:5]) and torch.equal(outs[1], total[5:])


def test_allgather_collects_every_contribution_in_ring_order(pair):
    comms = by_rank(pair)
    sends = [np.full(3, i + 1, dtype=np.int32) for i in range(2)]
    outs = [np.zeros(6, dtype=np.int32) for _ in range(2)]
    run_threads(*[lambda c=c, s=s, o=o: c.allgather(s, o).wait(timeout=30) for c, s, o in zip(comms, sends, outs)])
    for o in outs:
        np.testing.assert_array_equal(o, [1, 1, 1, 2, 2, 2])


@pytest.mark.parametrize("root", [0, 1])
def test_broadcast_from_either_root_in_bf16(pair, root):
    comms = by_rank(pair)
    bufs = [torch.full((100,), float(i + 1), dtype=torch.bfloat16) for i in range(2)]
    res = run_threads(*[lambda c=c, b=b: c.broadcast(b, root).wait(timeout=30) for c, b in zip(comms, bufs)])
    assert res[1] is bufs[1]
    for b in bufs:
        assert torch.equal(b, torch.full((100,), float(root + 1), dtype=torch.bfloat16))


def test_barrier_completes_on_both(pair):
    assert run_threads(*[lambda c=c: c.barrier().wait(timeout=30) for c in pair]) == [None, None]


def test_bad_shapes_and_arguments_are_refused_before_anything_is_sent(pair):
    c = pair[0]
    with pytest.raises(ValueError, match="one part per member"):
        c.reduce_scatter(torch.zeros(10), torch.zeros(4))  # 2 parts of 4 are 8, not 10
    with pytest.raises(ValueError, match="one part per member"):
        c.allgather(torch.zeros(3), torch.zeros(7))
    with pytest.raises(TypeError, match="same dtype"):
        c.allgather(torch.zeros(3), torch.zeros(6, dtype=torch.float64))
    with pytest.raises(ValueError):
        c.broadcast(torch.zeros(3), 7)  # no member at ring position 7
    with pytest.raises(ValueError, match="schedule"):
        c.barrier(schedule="star")
    with pytest.raises(lh.Unsupported):
        c.allgather(torch.zeros(3, dtype=torch.int32), torch.zeros(6, dtype=torch.int32), quant="u8")
