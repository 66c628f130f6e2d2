"""What a new user gets wrong must fail loudly (issue 49), from Python: min_peers and
wait_for_peers, secret_from_file, and Closed from unconnected, left and closed communicators."""
import os
import threading

import numpy as np
import pytest

import longhaul as lh
from conftest import run_threads


def test_connect_with_min_peers_waits_for_the_group(master):
    a = lh.Communicator(master.address, min_peers=2)
    b = lh.Communicator(master.address, min_peers=2)
    done = threading.Event()
    t = threading.Thread(target=lambda: (a.connect(), done.set()), daemon=True)
    t.start()
    assert not done.wait(0.3), "the first peer returned from connect() alone"
    b.connect()
    t.join(30)
    assert done.is_set() and a.group_size == 2 and b.group_size == 2
    a.close()
    b.close()


def test_min_peers_times_out_clearly_and_wait_for_peers_waits_again(master):
    a = lh.Communicator(master.address, min_peers=2, connect_timeout_ms=300)
    with pytest.raises(lh.Timeout, match="1 of the 2 members"):
        a.connect()
    x = np.ones(4, dtype=np.float32)
    a.allreduce(x).wait(timeout=30)  # admitted: a group of one works on
    with pytest.raises(lh.Timeout):
        a.wait_for_peers(2, timeout=0.1)
    b = lh.Communicator(master.address)
    t = threading.Thread(target=b.connect, daemon=True)
    t.start()
    a.wait_for_peers(2, timeout=30)
    t.join(30)
    assert a.group_size == 2
    a.close()
    b.close()


def test_an_unconnected_communicator_raises_closed_instead_of_returning_its_input(master):
    c = lh.Communicator(master.address)
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(lh.Closed, match="not connected"):
        c.allreduce(x)
    with pytest.raises(lh.Closed):
        c.barrier()
    with pytest.raises(lh.Closed):
        c.update_topology()
    with pytest.raises(lh.Closed):
        c.wait_for_peers(2, timeout=0)
    c.close()
    with pytest.raises(lh.Closed):
        c.allreduce(x)


def test_secret_from_file_reads_what_the_master_reads(tmp_path):
    path = tmp_path / "secret"
    hexes = "0123456789abcdef" * 4
    path.write_text(hexes + "\n")
    os.chmod(path, 0o600)
    secret = lh.secret_from_file(str(path))
    assert secret == hexes
    with lh.Master(secret=secret) as m:
        c = lh.Communicator(m.address, secret=secret).connect()
        assert c.group_size == 1
        c.close()
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        lh.secret_from_file(str(path))
    assert lh.secret_from_file(str(path), allow_weak=True) == hexes


@pytest.mark.parametrize("bad", [{"fragments": 0}, {"H": 0}, {"H": 2.5}, {"sync_delay": -1}, {"fragments": True}])
def test_diloco_refuses_bad_counts_with_a_value_error(master, bad):
    # fragments=0 used to raise ZeroDivisionError from deep inside the constructor.
    torch = pytest.importorskip("torch")
    from longhaul.torch import DiLoCo
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    name = next(iter(bad))
    with pytest.raises(ValueError, match=f"DiLoCo: {name} must be an int"):
        DiLoCo(model, opt, lh.Communicator(master.address), **bad)


def reform_and_allreduce(comm, x, passes=5):
    """What a training loop does after a failed collective: update_topology(), then the all-reduce
    again, while it fails with a PeerFailure. A member whose update_topology reached the master
    before the master heard of the failure is told there is nothing to do; its next collective
    fails once the group's abort reaches it, and its second pass re-forms with the others."""
    for _ in range(passes):
        comm.update_topology()
        try:
            comm.allreduce(x, timeout=30).wait(timeout=30)
            return
        except lh.PeerFailure:
            continue
    raise AssertionError(f"no all-reduce succeeded in {passes} passes")


def test_a_collective_timeout_fails_it_for_the_group_instead_of_hanging(pair):
    """A peer that never calls held the other for ever; with timeout= the one whose timeout passes
    gets Timeout, the late one PeerFailure (LH_ERR_ABORTED) at once, and after update_topology the next one is exact."""
    a, b = pair
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(lh.Timeout, match="timeout of 200 ms"):
        a.allreduce(x, timeout=0.2).wait(timeout=30)
    y = np.ones(4, dtype=np.float32)
    # The late member's call of the same collective: cancelled. (A barrier here was a different
    # call, which the signatures now report as a Mismatch when the cancel has not reached b yet.)
    with pytest.raises(lh.PeerFailure) as late:
        b.allreduce(y, timeout=30).wait(timeout=30)
    assert late.value.status == "LH_ERR_ABORTED", str(late.value)
    np.testing.assert_array_equal(y, np.ones(4, dtype=np.float32))
    np.testing.assert_array_equal(x, np.ones(4, dtype=np.float32))  # given back
    run_threads(lambda: reform_and_allreduce(a, x), lambda: reform_and_allreduce(b, y))
    np.testing.assert_array_equal(x, np.full(4, 2.0, dtype=np.float32))
    with pytest.raises(ValueError, match="timeout"):
        a.allreduce(x, timeout=0)
    with pytest.raises(ValueError, match="timeout"):
        a.barrier(timeout=float("nan"))


def test_cancel_fails_the_collective_for_the_group_and_the_next_one_is_exact(pair):
    """Work had no cancel(): a collective a peer would never join could only be left to hang."""
    a, b = pair
    x = np.ones(4, dtype=np.float32)
    work = a.allreduce(x)
    work.cancel()
    with pytest.raises(lh.PeerFailure, match="cancelled by the caller") as cancelled:
        work.wait(timeout=30)
    assert cancelled.value.status == "LH_ERR_ABORTED"
    work.cancel()  # a no-op once done
    np.testing.assert_array_equal(x, np.ones(4, dtype=np.float32))  # given back
    y = np.ones(4, dtype=np.float32)
    with pytest.raises(lh.PeerFailure):
        b.allreduce(y).wait(timeout=30)  # its part of the cancelled collective fails too
    run_threads(lambda: reform_and_allreduce(a, x), lambda: reform_and_allreduce(b, y))
    np.testing.assert_array_equal(x, np.full(4, 2.0, dtype=np.float32))


# A peer whose partner never joins its all-reduce; after the timed wait gives up, the Work is
# dropped (`del`), or left for the interpreter's exit to collect.
DROPPED_WORK = """
import sys, threading, time
import numpy as np
import longhaul as lh
with lh.Master() as m:
    a = lh.Communicator(m.address).connect()
    b = lh.Communicator(m.address)
    t = threading.Thread(target=b.connect)
    t.start()
    while not a.peers_pending():
        time.sleep(0.005)
    a.update_topology()
    t.join()
    work = a.allreduce(np.ones(4, dtype=np.float32))
    try:
        work.wait(timeout=0.2)
    except lh.Timeout:
        pass
    if sys.argv[1] == "del":
        start = time.monotonic()
        del work
        print(f"dropped in {time.monotonic() - start:.3f} s", flush=True)
    else:
        sys.exit(0)  # the Work, the communicators and the master are collected at exit
"""


@pytest.mark.parametrize("how", ["del", "exit"])
def test_a_work_dropped_unfinished_cancels_instead_of_hanging(how):
    """Deleting an unfinished Work after wait(timeout) raised Timeout hung for ever, interpreter
    exit included: its destructor waited for a peer that never came."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", DROPPED_WORK, how], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    if how == "del":
        assert "dropped in" in p.stdout, p.stdout


def test_an_unreachable_master_is_not_a_retryable_peer_failure():
    """connect() to an address where no master listens raised PeerFailure, which the docs call
    retryable after update_topology(); it is MasterUnreachable (a ConnectionError)."""
    import socket
    with socket.socket() as closed_port:  # bound, never listening: connections are refused
        closed_port.bind(("127.0.0.1", 0))
        address = "127.0.0.1:%d" % closed_port.getsockname()[1]
        c = lh.Communicator(address, connect_timeout_ms=500)
        with pytest.raises(lh.MasterUnreachable) as unreachable:
            c.connect()
    assert isinstance(unreachable.value, ConnectionError)
    assert not isinstance(unreachable.value, lh.PeerFailure)
    assert unreachable.value.status == "LH_ERR_PEER_LOST"
    c.close()



def test_calls_that_disagree_raise_mismatch_on_every_member(pair):
    """sum on one peer and max on the other returned mixed results; different sizes hung one
    peer. Each now raises Mismatch (not a PeerFailure: retrying the same calls fails again) naming
    the field, with the tensors as they were."""
    a, b = pair
    x = np.full(8, 1.0, dtype=np.float32)
    y = np.full(8, 2.0, dtype=np.float32)
    works = run_threads(lambda: a.allreduce(x, "sum"), lambda: b.allreduce(y, "max"))
    for w in works:
        with pytest.raises(lh.Mismatch, match="the reduce op") as e:
            w.wait(timeout=30)
        assert e.value.status == "LH_ERR_MISMATCH"
        assert not isinstance(e.value, lh.PeerFailure)
    np.testing.assert_array_equal(x, np.full(8, 1.0, dtype=np.float32))
    np.testing.assert_array_equal(y, np.full(8, 2.0, dtype=np.float32))
    big = np.ones(16, dtype=np.float32)
    works = run_threads(lambda: a.allreduce(x), lambda: b.allreduce(big))
    for w in works:
        with pytest.raises(lh.Mismatch, match="the count: "):
            w.wait(timeout=30)
    # The next agreeing call is exact (the asynchronous calls leave the epoch as it was).
    for w in run_threads(lambda: a.allreduce(x), lambda: b.allreduce(y)):
        w.wait(timeout=30)
    np.testing.assert_array_equal(x, np.full(8, 3.0, dtype=np.float32))
