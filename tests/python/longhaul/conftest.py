"""Shared fixtures of the Python binding tests.

The package under test is the one on sys.path: ctest puts the build tree's staged package
(build/PRESET/bindings/python) on PYTHONPATH; after `pip install ./bindings/python` the installed
one is found. Every test makes its own master on an ephemeral port, so tests run in parallel.
"""
import threading
import time

import pytest

import longhaul as lh


@pytest.fixture
def master():
    with lh.Master(heartbeat_interval_ms=200, heartbeat_misses=3) as m:
        yield m


def run_threads(*fns, timeout=60):
    """Runs each fn on its own thread; returns their results, re-raising the first exception."""
    results = [None] * len(fns)
    errors = [None] * len(fns)

    def body(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread below
            errors[i] = e

    threads = [threading.Thread(target=body, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a peer thread hung"
    for e in errors:
        if e is not None:
            raise e
    return results


def admit(comm, timeout=30):
    """Waits until the master flags a change (a joiner), then runs update_topology."""
    deadline = time.monotonic() + timeout
    while not comm.peers_pending():
        assert time.monotonic() < deadline, "no joiner showed up"
        time.sleep(0.005)
    comm.update_topology()


def connect_group(master, n, **kwargs):
    """n communicators in one epoch, admitted in order (peer ids, and so the ring, in that order)."""
    comms = [lh.Communicator(master.address, **kwargs).connect()]
    for _ in range(1, n):
        joiner = lh.Communicator(master.address, **kwargs)
        run_threads(joiner.connect, *[lambda c=c: admit(c) for c in comms])
        comms.append(joiner)
    for c in comms:
        assert c.group_size == n
    return comms


@pytest.fixture
def pair(master):
    comms = connect_group(master, 2)
    yield comms
    for c in comms:
        c.close()
