"""CUDA tensors from Python (docs/gpu.md): staged through pinned memory, the same results as a CPU
peer's, refused where the library does not stage device memory. Skipped without a CUDA device."""
import numpy as np
import pytest
import torch

import longhaul as lh
from conftest import run_threads

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@pytest.mark.parametrize("quant", [None, "u8", "e3m0"])
def test_a_cuda_tensor_reduces_like_its_cpu_copy(pair, quant):
    g = torch.Generator().manual_seed(1)
    x = [torch.randn(300_001, generator=g) for _ in range(2)]
    want = [t.clone() for t in x]
    run_threads(*[lambda c=c, t=t: c.allreduce(t, "avg", quant=quant).wait(timeout=30) for c, t in zip(pair, want)])
    on_gpu = x[0].cuda() * 1.0  # written by a kernel on torch's current stream just before the call
    run_threads(lambda: pair[0].allreduce(on_gpu, "avg", quant=quant).wait(timeout=30),
                lambda: pair[1].allreduce(x[1], "avg", quant=quant).wait(timeout=30))
    assert on_gpu.is_cuda
    assert torch.equal(on_gpu.cpu(), want[0]) and torch.equal(x[1], want[1])


def test_bf16_cuda_with_out(pair):
    a = torch.full((4097,), 1.5, dtype=torch.bfloat16, device="cuda")
    out = torch.empty_like(a)
    b = torch.full((4097,), 2.5, dtype=torch.bfloat16)
    res = run_threads(lambda: pair[0].allreduce(a, out=out).wait(timeout=30),
                      lambda: pair[1].allreduce(b).wait(timeout=30))
    assert res[0] is out
    assert torch.equal(out.cpu(), torch.full((4097,), 4.0, dtype=torch.bfloat16))
    assert torch.equal(a.cpu(), torch.full((4097,), 1.5, dtype=torch.bfloat16)), "the input is only read"


def test_sync_state_with_cuda_tensors(pair):
    w = torch.arange(1 << 19, dtype=torch.float32, device="cuda")
    states = [{"w": w, "step": np.array([5], dtype=np.int64)},
              {"w": np.zeros(1 << 19, dtype=np.float32), "step": np.array([0], dtype=np.int64)}]
    # Peer 0 (the lowest id) wins the tie: its device tensor reaches peer 1's numpy array.
    run_threads(*[lambda c=c, s=s: c.sync_state(s, revision=1) for c, s in zip(pair, states)])
    np.testing.assert_array_equal(states[1]["w"], w.cpu().numpy())
    assert states[1]["step"][0] == 5


def test_calls_that_do_not_stage_device_memory_say_so(pair):
    with pytest.raises(lh.Unsupported, match="device memory"):
        pair[0].allreduce_batch([torch.ones(8, device="cuda")])
