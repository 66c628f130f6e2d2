"""CUDA tensors from Python (docs/gpu.md): staged through pinned memory, the same results as a CPU
peer's, in all-reduces, batches, state syncs and DiLoCo. Skipped without a CUDA device."""
import numpy as np
import pytest
import torch

import longhaul as lh
from conftest import connect_group, run_threads

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


def test_the_copies_wait_on_the_gpu_for_the_stream_that_wrote_the_tensor(pair):
    """DLPack's stream handshake: the tensor is written on a side stream that is still busy (a
    long GPU sleep first) when the all-reduce starts, and the host does not wait for it; the
    library's copies must wait for the write on the GPU."""
    n = 1 << 20
    x = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU clock cycles
        x.fill_(3.0)
        mine = pair[0].allreduce(x)  # on this thread: the side stream is the current one
    theirs = pair[1].allreduce(torch.full((n,), 4.0))
    mine.wait(timeout=30)
    theirs.wait(timeout=30)
    assert torch.equal(x.cpu(), torch.full((n,), 7.0))


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


def test_a_batch_of_cuda_and_cpu_tensors_reduces_like_a_cpu_batch(pair):
    g = torch.Generator().manual_seed(3)
    mine = [torch.randn(70_001, generator=g), torch.randn(33, generator=g)]
    theirs = [torch.randn(70_001, generator=g), torch.randn(33, generator=g)]
    want = [a + b for a, b in zip(mine, theirs)]  # two peers: one addition, either order
    on_gpu = [mine[0].cuda(), mine[1]]  # a device tensor beside a host one in one batch
    run_threads(lambda: pair[0].allreduce_batch(on_gpu), lambda: pair[1].allreduce_batch(theirs))
    assert on_gpu[0].is_cuda
    assert torch.equal(on_gpu[0].cpu(), want[0]) and torch.equal(on_gpu[1], want[1])
    assert all(torch.equal(t, w) for t, w in zip(theirs, want))


def test_reduce_scatter_allgather_and_broadcast_of_cuda_tensors(pair):
    """Ring member 0's buffers on the device, member 1's on the host: the results of a CPU pair."""
    comms = sorted(pair, key=lambda c: c.rank)
    sends = [torch.arange(100_002, dtype=torch.float32) * (i + 1) for i in range(2)]
    outs = [torch.full((50_001,), -1.0, device="cuda"), torch.full((50_001,), -1.0)]
    run_threads(*[lambda c=c, s=s, o=o: c.reduce_scatter(s, o).wait(timeout=30)
                  for c, s, o in zip(comms, [sends[0].cuda(), sends[1]], outs)])
    total = torch.arange(100_002, dtype=torch.float32) * 3
    assert outs[0].is_cuda and torch.equal(outs[0].cpu(), total[:50_001]) and torch.equal(outs[1], total[50_001:])

    parts = [torch.full((3,), 1, dtype=torch.int32, device="cuda"), torch.full((3,), 2, dtype=torch.int32)]
    gathered = [torch.zeros(6, dtype=torch.int32, device="cuda"), torch.zeros(6, dtype=torch.int32)]
    run_threads(*[lambda c=c, s=s, o=o: c.allgather(s, o).wait(timeout=30) for c, s, o in zip(comms, parts, gathered)])
    want = torch.tensor([1, 1, 1, 2, 2, 2], dtype=torch.int32)
    assert torch.equal(gathered[0].cpu(), want) and torch.equal(gathered[1], want)

    bufs = [torch.full((1000,), 7.0, dtype=torch.bfloat16, device="cuda"), torch.zeros(1000, dtype=torch.bfloat16)]
    run_threads(*[lambda c=c, b=b: c.broadcast(b, 0).wait(timeout=30) for c, b in zip(comms, bufs)])
    assert torch.equal(bufs[1], torch.full((1000,), 7.0, dtype=torch.bfloat16))
    assert torch.equal(bufs[0].cpu(), bufs[1])


def test_an_out_of_place_cuda_allreduce_lands_segment_by_segment_like_a_cpu_one(pair):
    """Out of place, the staging pipeline writes each finished segment while the rest travels
    (docs/gpu.md): many 1 MiB segments here, the same bytes as a CPU pair's."""
    g = torch.Generator().manual_seed(5)
    x = [torch.randn(4 << 20, generator=g) for _ in range(2)]
    want = x[0] + x[1]
    on_gpu, out = x[0].cuda(), torch.empty(4 << 20, device="cuda")
    theirs = x[1].clone()
    run_threads(lambda: pair[0].allreduce(on_gpu, out=out).wait(timeout=60),
                lambda: pair[1].allreduce(theirs).wait(timeout=60))
    assert torch.equal(out.cpu(), want) and torch.equal(theirs, want)
    assert torch.equal(on_gpu.cpu(), x[0]), "the input is only read"


def _diloco_run(devices, fragments):
    """Two peers of DiLoCo over a Linear and a bf16 Linear, peer i's parameters on devices[i].
    The inner step is exact in IEEE arithmetic (SGD of lr 0.5 towards a dyadic target), so a CUDA
    peer trains bit for bit as a CPU peer would; returns θ_g's hash and each peer's parameters."""
    import copy

    from longhaul.torch import DiLoCo

    torch.manual_seed(0)  # here, not in the peers' threads, which would share the generator
    base = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.Linear(48, 8).bfloat16())

    def peer(i, comm):
        model = copy.deepcopy(base).to(devices[i])
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        diloco = DiLoCo(model, opt, comm, H=3, fragments=fragments,
                        sync_delay=1 if fragments > 1 else 0, quant="u8").join()
        for step in range(1, 13):
            for p in model.parameters():
                target = torch.full_like(p, 0.25 * (i + 1) + step / 64)
                p.grad = p.detach() - target  # written on the device's current stream
            opt.step()
        h = diloco.hash()
        diloco.close()
        return h, [p.detach().cpu().clone() for p in model.parameters()]

    with lh.Master(heartbeat_interval_ms=200, heartbeat_misses=3) as master:
        comms = connect_group(master, 2)
        try:
            return run_threads(*[lambda i=i, c=c: peer(i, c) for i, c in enumerate(comms)])
        finally:
            for c in comms:
                c.close()


@pytest.mark.parametrize("fragments", [1, 2])
def test_diloco_trains_cuda_parameters_bit_for_bit_as_cpu_ones(fragments):
    gpu = _diloco_run(("cuda", "cpu"), fragments)
    cpu = _diloco_run(("cpu", "cpu"), fragments)
    assert gpu[0][0] == gpu[1][0] == cpu[0][0], "one θ_g, the same as two CPU peers'"
    for peer in range(2):
        for got, want in zip(gpu[peer][1], cpu[peer][1]):
            assert torch.equal(got, want)
