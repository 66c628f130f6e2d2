"""All-reduce from Python: results, DLPack edge cases, handles, errors."""
import gc

import numpy as np
import pytest
import torch

import longhaul as lh
from conftest import run_threads


def allreduce_all(comms, tensors, **kw):
    return run_threads(*[lambda c=c, t=t: c.allreduce(t, **kw).wait(timeout=30) for c, t in zip(comms, tensors)])


def test_sum_in_place_numpy(pair):
    a = [np.arange(1000, dtype=np.float32) * (i + 1) for i in range(2)]
    out = allreduce_all(pair, a)
    for x in out:
        np.testing.assert_array_equal(x, np.arange(1000, dtype=np.float32) * 3)
    assert out[0] is a[0], "in place: wait() returns the tensor itself"


def test_torch_avg_with_out_leaves_input(pair):
    t = [torch.full((257,), float(i + 1)) for i in range(2)]
    outs = [torch.empty(257) for _ in range(2)]
    res = run_threads(*[lambda c=c, x=x, o=o: c.allreduce(x, "avg", out=o).wait() for c, x, o in zip(pair, t, outs)])
    assert res[0] is outs[0]
    assert torch.equal(outs[0], torch.full((257,), 1.5)) and torch.equal(outs[1], outs[0])
    assert torch.equal(t[0], torch.full((257,), 1.0)), "with out=, the input is only read"


def test_bf16(pair):
    t = [torch.full((300,), 1.5, dtype=torch.bfloat16) for _ in range(2)]
    allreduce_all(pair, t)
    assert t[0].dtype == torch.bfloat16 and torch.equal(t[0], torch.full((300,), 3.0, dtype=torch.bfloat16))


def test_zero_size_is_a_collective_of_nothing(pair):
    t = [torch.empty(0) for _ in range(2)]
    out = allreduce_all(pair, t)
    assert out[0].numel() == 0


def test_requires_grad_parameter_is_written_in_place(pair):
    params = [torch.nn.Parameter(torch.full((16,), float(i + 1))) for i in range(2)]
    allreduce_all(pair, params)
    assert params[0].requires_grad and torch.equal(params[0].detach(), torch.full((16,), 3.0))


def test_non_contiguous_view_is_refused(pair):
    t = torch.arange(16, dtype=torch.float32).reshape(4, 4).t()
    with pytest.raises(ValueError, match="not contiguous"):
        pair[0].allreduce(t)
    with pytest.raises(ValueError, match="not contiguous"):
        pair[0].allreduce(np.arange(10, dtype=np.float32)[::2])


def test_read_only_numpy(pair):
    ro = np.ones(8, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        pair[0].allreduce(ro)
    # As an input with a separate out= it is fine.
    outs = [np.empty(8, dtype=np.float32) for _ in range(2)]
    run_threads(*[lambda c=c, o=o: c.allreduce(ro, out=o).wait() for c, o in zip(pair, outs)])
    np.testing.assert_array_equal(outs[1], np.full(8, 2.0, dtype=np.float32))


class CudaProducer:
    """A DLPack producer that says its memory is on CUDA device 0 and records the stream each
    consumer asks for. It exports a host array, so the test runs without a GPU."""

    def __init__(self, array):
        self.array = array
        self.streams = []

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, stream=None, **kwargs):
        self.streams.append(stream)
        return self.array.__dlpack__()


def test_cuda_memory_is_exported_with_the_stream_handshake(pair):
    """The library's streams are blocking streams: a CUDA producer is asked for its tensor with
    stream=1 (the legacy default stream), so it orders that stream after its writes on the GPU."""
    x = CudaProducer(np.full(1000, 2.0, dtype=np.float32))
    y = np.full(1000, 3.0, dtype=np.float32)
    allreduce_all(pair, [x, y])
    assert x.streams == [1], "one export, with the legacy default stream as the consumer's"
    np.testing.assert_array_equal(x.array, np.full(1000, 5.0, dtype=np.float32))
    on_cpu = CudaProducer(np.ones(4, dtype=np.float32))
    on_cpu.__dlpack_device__ = lambda: (1, 0)
    allreduce_all(pair, [on_cpu, np.ones(4, dtype=np.float32)])
    assert on_cpu.streams == [None], "host memory: no stream asked (nanobind's own export)"


def test_bad_arguments(pair):
    c = pair[0]
    with pytest.raises(TypeError, match="dtype"):
        c.allreduce(np.ones(4, dtype=bool))
    with pytest.raises(TypeError, match="DLPack"):
        c.allreduce([1.0, 2.0])
    with pytest.raises(ValueError, match="op must be"):
        c.allreduce(np.ones(4, dtype=np.float32), "median")
    with pytest.raises(ValueError, match="quant must be"):
        c.allreduce(np.ones(4, dtype=np.float32), quant="u7")
    with pytest.raises(ValueError, match="dtype and number"):
        c.allreduce(np.ones(4, dtype=np.float32), out=np.ones(5, dtype=np.float32))
    with pytest.raises(lh.Unsupported):
        c.allreduce(np.ones(4, dtype=np.float64), quant="u8")
    # (CUDA tensors are taken: test_cuda.py.)


def test_handle_keeps_tensors_alive_and_times_out(pair):
    t0 = torch.ones(1 << 16)
    w0 = pair[0].allreduce(t0)
    del t0
    gc.collect()
    with pytest.raises(lh.Timeout):
        w0.wait(timeout=0.2)  # the other peer has not started yet
    assert not w0.done()
    w1 = pair[1].allreduce(torch.ones(1 << 16))
    r0, r1 = run_threads(lambda: w0.wait(timeout=30), lambda: w1.wait())
    assert torch.equal(r0, torch.full((1 << 16,), 2.0)) and w0.done()
    assert w0.info["world_size"] == 2 and w0.info["bytes_sent"] > 0


def test_quantized_results_agree(pair):
    g = np.random.default_rng(1)
    a = [g.standard_normal(10000).astype(np.float32) for _ in range(2)]
    exact = a[0] + a[1]
    out = allreduce_all(pair, a, quant="u8")
    assert out[0].tobytes() == out[1].tobytes()
    assert np.max(np.abs(out[0] - exact)) < 0.2


def test_batch(pair):
    ts = [[torch.full((n,), float(i + 1)) for n in (3, 1000, 5)] for i in range(2)]
    run_threads(*[lambda c=c, t=t: c.allreduce_batch(t) for c, t in zip(pair, ts)])
    assert all(torch.equal(x, torch.full_like(x, 3.0)) for x in ts[0] + ts[1])


def test_lost_peer_is_a_peer_failure_then_retry(pair):
    a, b = pair
    t = np.ones(1 << 20, dtype=np.float32)
    w = a.allreduce(t)
    b.close(None)  # abrupt
    with pytest.raises(lh.PeerFailure) as e:
        w.wait(timeout=30)
    assert e.value.status in ("LH_ERR_PEER_LOST", "LH_ERR_ABORTED") and str(e.value)
    np.testing.assert_array_equal(t, 1.0)  # the input is given back intact
    a.update_topology()
    assert a.group_size == 1
    np.testing.assert_array_equal(a.allreduce(t).wait(), 1.0)


def test_closed_communicator(master):
    c = lh.Communicator(master.address).connect()
    c.close()
    assert c.closed
    with pytest.raises(lh.Closed):
        c.allreduce(np.ones(2, dtype=np.float32))


def test_connect_errors(master):
    with pytest.raises(ValueError, match="master_address|host:port"):
        lh.Communicator("no-port")
    c = lh.Communicator(master.address, node="n", node_rail=0, node_rails=2, connect_timeout_ms=500)
    with pytest.raises(lh.Timeout, match="rail"):
        c.connect()
    c.close()


def test_master_journal_and_restart_options(tmp_path):
    journal = tmp_path / "master.journal"
    with lh.Master(journal_path=str(journal)) as m:
        assert journal.read_text().startswith("longhaul-master-journal 1 ")
        c = lh.Communicator(m.address, master_reconnect_timeout_ms=5000, link_upload_mbit=100).connect()
        np.testing.assert_array_equal(c.allreduce(np.ones(4, dtype=np.float32)).wait(), 1.0)
        c.close()
    # Stopping the master ends the run; a master started on the same journal is a restart.
    with lh.Master(journal_path=str(journal)) as m:
        c = lh.Communicator(m.address).connect()
        c.close()
