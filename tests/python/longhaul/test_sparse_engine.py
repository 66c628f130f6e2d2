"""The sync engine with the sparse codec (quant="sparse") from Python: peers stay bit-identical,
the codec's options are checked, and a round sends far less than the f32 parameters."""
import numpy as np
import pytest

import longhaul as lh
from conftest import run_threads

N = 4096


def sparse_peer(i, comm, steps, **options):
    """Trains one peer's parameters towards its own target; returns the hash after every step."""
    params = np.full(N, 1.0, dtype=np.float32)
    target = np.linspace(-1.0, 1.0, N, dtype=np.float32) * (i + 1)
    engine = lh.SyncEngine(comm, [params], sync_every=2, quant="sparse", **options)
    hashes = []
    for _ in range(steps):
        params += np.float32(0.25) * (target - params)
        engine.step()
        hashes.append(engine.hash())
    stats, excluded = engine.stats(), engine.last_excluded()
    theta = np.empty(N, dtype=np.float32)
    engine.global_params(0, theta)
    engine.close()
    engine.destroy()
    return hashes, stats, excluded, theta


def test_sparse_engine_keeps_every_peer_identical(pair):
    (h0, s0, x0, t0), (h1, s1, x1, t1) = run_threads(
        *[lambda i=i, c=c: sparse_peer(i, c, 8, topk_per_chunk=16, chunk=256)
          for i, c in enumerate(pair)])
    assert h0 == h1
    np.testing.assert_array_equal(t0, t1)
    assert s0["rounds_applied"] == 4 and s0["last_participants"] == 2
    assert x0 == [] and x1 == []
    assert s0["malformed_excluded"] == 0 and s0["non_finite_excluded"] == 0
    # 16 values of 256 at 10 bits each (plus a 4-byte record header) per peer, against 16 KiB of
    # f32 parameters: a round moves a small fraction of the dense bytes (headers included).
    assert s0["peak_event_bytes"] < 0.25 * 4 * N
    # The codec's own bytes, one encoding per settled round: at least the 16 chunks' 16 values of
    # 10 bits, and far below the f32 bytes (the sparse_codec_ratio of bench/run diloco).
    for s in (s0, s1):
        per_round = s["sparse_encoded_bytes"] / 4
        assert 16 * 16 * 10 / 8 <= per_round < 4 * N / 16, per_round
    assert np.isfinite(t0).all() and not np.array_equal(t0, np.ones(N, dtype=np.float32))


def test_sparse_options_are_checked(pair):
    params = [np.zeros(16, dtype=np.float32)]
    with pytest.raises(ValueError, match="sparse"):
        lh.SyncEngine(pair[0], params, topk_per_chunk=8)
    with pytest.raises(ValueError):
        lh.SyncEngine(pair[0], params, quant="sparse", topk_per_chunk=0)
    with pytest.raises(lh.Unsupported):
        lh.SyncEngine(pair[0], params, quant="sparse", method="co2")
