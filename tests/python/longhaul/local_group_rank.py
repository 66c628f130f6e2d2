"""One rank of a node for test_local_group.py: forms its node's LocalGroup, connects, runs
`steps` hierarchical all-reduces of a torch tensor and prints each result's distinct values."""
import json
import sys
import time

import torch

import longhaul as lh

master, node, index, rail, rails, steps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
comm = lh.Communicator(master, node=node, node_rail=rail, node_rails=rails, peer_group=rail)
with lh.LocalGroup(comm) as group:
    comm.connect()
    while comm.group_size < 2:  # both nodes in before the first step
        if comm.peers_pending():
            comm.update_topology()
        time.sleep(0.01)
    for step in range(steps):
        x = torch.full((1001,), float((index + 1) * (rail + 1) + step))
        x[::7] *= 2
        y = group.allreduce(x, "sum", max_attempts=3)
        assert y is x
        print(json.dumps({"step": step, "values": sorted(set(x.tolist()))}), flush=True)
comm.close("done")
