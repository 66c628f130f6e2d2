#!/usr/bin/env python3
"""Runs M nodes x N ranks of a training script on one machine, as torchrun would on M machines.

Starts a longhaul master in this process, then for every node m its N ranks as processes with
torchrun's environment (LOCAL_RANK, LOCAL_WORLD_SIZE, RANK, WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
and a MASTER_PORT of the node's own, so each node has its own torch.distributed group) and the
arguments `--longhaul-master ADDR --node-name node<m> --node-index m` plus whatever follows `--`:

    python3 launch_local.py --nodes 2 --ranks 2 -- --outer-steps 3

Waits for every rank; stops them all (and the master) if any fails or on Ctrl-C. Exit status 0
when every rank exited 0.
"""
import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import time

import longhaul

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    """A port for a node's torch.distributed store that nothing else on this machine is given
    meanwhile: one below the kernel's ephemeral range (which every bind to port 0 and every
    outgoing connection draws from), free when checked. A port from port 0 instead would go back to
    that range between this check and the store's bind, and another process could take it first."""
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(max(1024, low // 2), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port below the ephemeral range (from {low})")


def rank_env(node, rank, ranks, port):
    env = dict(os.environ, LOCAL_RANK=str(rank), RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks),
               WORLD_SIZE=str(ranks), GROUP_RANK=str(node), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


def start_node(node, nodes, ranks, script, master, extra):
    port = free_port()
    return [subprocess.Popen([sys.executable, script, "--longhaul-master", master, "--node-name", f"node{node}",
                              "--node-index", str(node), "--nodes", str(nodes), *extra], env=rank_env(node, r, ranks, port))
            for r in range(ranks)]


def stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2, help="M")
    ap.add_argument("--ranks", type=int, default=2, help="N, ranks per node")
    ap.add_argument("--script", default=os.path.join(HERE, "train_fsdp_diloco.py"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="-- then the script's own arguments")
    a = ap.parse_args()
    extra = a.extra[1:] if a.extra[:1] == ["--"] else a.extra
    with longhaul.Master(listen="127.0.0.1:0") as master:
        procs = []
        try:
            for m in range(a.nodes):
                procs += start_node(m, a.nodes, a.ranks, a.script, master.address, extra)
            deadline = time.monotonic() + a.timeout
            while any(p.poll() is None for p in procs):
                if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        finally:
            stop(procs)
    codes = [p.returncode for p in procs]
    print(f"launch_local: exit statuses {codes}", flush=True)
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
