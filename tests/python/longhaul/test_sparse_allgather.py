"""Communicator.sparse_allgather (lh_sparse_allgather) from Python: contributions of any size,
empty included, in ring order and the same on every member; a malformed sparse encoding refused
alike on every member with its peer named; the settled form; bad arguments."""
import numpy as np
import pytest

import longhaul as lh
from conftest import connect_group, run_threads

# The sparse codec's golden example (docs/quantization.md, "Wire format"): chunk 4, k 2, 7 elements.
GOLDEN = bytes.fromhex("4C485350 01 02 0000 04000000 02000000 0700000000000000"
                       "0040 0200 2D"
                       "4040 0200 54")


def gather(comms, datas, **kwargs):
    return run_threads(*[lambda c=c, d=d: c.sparse_allgather(d, **kwargs) for c, d in zip(comms, datas)])


def close(comms):
    for c in comms:
        c.close()


def test_the_golden_encoding_is_what_the_docs_say():
    assert len(GOLDEN) == 24 + 5 + 5
    assert GOLDEN[:4] == b"LHSP"


@pytest.mark.parametrize("full_mesh,schedule", [(False, "ring"), (True, "direct"), (True, "auto")])
def test_every_member_gets_every_contribution_in_ring_order(master, full_mesh, schedule):
    comms = connect_group(master, 3, full_mesh=full_mesh)
    rng = np.random.default_rng(7)
    datas = [rng.integers(0, 256, 300_001, dtype=np.uint8).tobytes(), b"",
             bytearray(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())]
    # A numpy array is bytes-like too.
    datas[0] = np.frombuffer(datas[0], dtype=np.uint8)
    results = gather(comms, datas, schedule=schedule, segment_bytes=65536)
    for c, got in zip(comms, results):
        assert isinstance(got, list) and len(got) == 3
        assert all(isinstance(b, bytes) for b in got)
        assert got == results[0], "every member holds the same bytes"
        assert got[c.rank] == bytes(datas[comms.index(c)])
    assert sorted(len(b) for b in results[0]) == [0, 4096, 300_001]
    close(comms)


def test_a_malformed_contribution_is_refused_with_its_peer_named_on_every_member(master):
    comms = connect_group(master, 3)
    datas = [GOLDEN, b"", b"not a sparse encoding, just 40 bytes....."]
    errors = []

    def call(c, d):
        try:
            c.sparse_allgather(d, validate="codec", expected_elements=7)
        except lh.LonghaulError as e:
            errors.append((c, e))

    run_threads(*[lambda c=c, d=d: call(c, d) for c, d in zip(comms, datas)])
    assert len(errors) == 3, "every member refuses it"
    bad = comms[2]
    for c, e in errors:
        assert e.status == "LH_ERR_PROTOCOL"
        assert f"peer {bad.peer_id} at ring position {bad.rank}" in str(e)
        assert "bad magic" in str(e)
        assert e.malformed == [bad.rank]
        assert e.contributions[bad.rank] == datas[2]
        assert e.contributions[comms[0].rank] == GOLDEN
    # The same encoding of another length than expected is refused too; accepted as it is.
    with pytest.raises(lh.LonghaulError, match="not the 8 expected"):
        gather(comms, [GOLDEN, GOLDEN, b""], validate="codec", expected_elements=8)
    assert gather(comms, [GOLDEN, GOLDEN, b""], validate="codec")[0][comms[1].rank] == GOLDEN
    close(comms)


def test_the_settled_form_agrees_on_every_member(master):
    comms = connect_group(master, 2)
    results = gather(comms, [b"a" * 10, b"bb"], max_attempts=2)
    assert results[0] == results[1]
    assert sorted(results[0]) == [b"a" * 10, b"bb"]
    close(comms)


def test_bad_arguments_are_refused(master):
    (c,) = connect_group(master, 1)
    assert c.sparse_allgather(b"alone") == [b"alone"]
    with pytest.raises(ValueError, match="validate"):
        c.sparse_allgather(b"x", validate="strict")
    with pytest.raises(ValueError, match="schedule"):
        c.sparse_allgather(b"x", schedule="star")
    with pytest.raises(TypeError, match="bytes-like"):
        c.sparse_allgather(12)
    with pytest.raises(ValueError, match="LH_SPARSE_VALIDATE_CODEC"):
        c.sparse_allgather(b"x", expected_elements=3)
    with pytest.raises(lh.Unsupported):
        c.sparse_allgather(b"x", schedule="direct")  # needs full_mesh
    with pytest.raises(lh.LonghaulError, match="add up to more than 3 bytes"):
        c.sparse_allgather(b"four", max_total_bytes=3)
    c.close()
    with pytest.raises(lh.Closed):
        c.sparse_allgather(b"x")
