#!/usr/bin/env python3
"""FSDP2 + DiLoCo with longhaul: one node's rank of a small transformer language model.

Every node (machine) trains one replica of the model, sharded over its N local ranks with FSDP2
(`fully_shard`, gloo on CPU); the nodes synchronize with DiLoCo / Streaming DiLoCo through
longhaul, rail r of every node reducing shard r with the others. Run it on each machine with

    torchrun --standalone --nproc-per-node N train_fsdp_diloco.py --longhaul-master HOST:PORT \
        --node-name NAME

(a longhaul master must be running: `longhaul-master --listen 0.0.0.0:PORT`, or launch_local.py
on one machine, which also starts the master). The data is synthetic and seeded by (node, step,
rank) so that runs can be compared; swap in your own loader.

--outer-log PATH appends one JSON line per outer step (engine hash, shard hash); --dump PATH writes
this rank's shards at the end (the tests compare them with a single-process reference).

No flag of this script is a prefix of one of torchrun's (--master-addr, --node-rank, --log-dir, ...):
torchrun's parser reads the whole command line first and refuses a prefix of two of its options as
ambiguous (or silently takes one it matches alone).
"""
import argparse
import hashlib
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

import longhaul
from longhaul.torch import DiLoCo, local_tensor

VOCAB, DIM, HEADS, LAYERS, SEQ = 64, 32, 4, 2, 16


class TinyLM(nn.Module):
    """Token embedding, LAYERS transformer encoder layers (causal), an output projection."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(DIM, HEADS, 2 * DIM, dropout=0.0, batch_first=True) for _ in range(LAYERS))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.head(x)


def make_model(seed=0):
    torch.manual_seed(seed)
    return TinyLM()


def batch(node, step, rank, per_rank):
    """Rank `rank`'s share of node `node`'s batch at inner step `step` (inputs, targets)."""
    g = torch.Generator().manual_seed(1_000_003 * node + 7919 * step + rank)
    seq = torch.randint(0, VOCAB, (per_rank, SEQ + 1), generator=g)
    return seq[:, :-1], seq[:, 1:]


def loss_fn(model, inputs, targets):
    return nn.functional.cross_entropy(model(inputs).reshape(-1, VOCAB), targets.reshape(-1))


def make_optimizer(params, lr, kind="adamw"):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)


def shard_hash(model, fragment, fragments):
    """A hash of this rank's shards of one fragment (parameter i is in fragment i mod F)."""
    h = hashlib.sha256()
    for i, p in enumerate(model.parameters()):
        if i % fragments == fragment:
            h.update(local_tensor(p).detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def synced_at(step, H, fragments):
    """The fragments whose outer round ran at this inner step (round k >= 1 of fragment f runs
    after step k*H + f*(H//F), docs/training.md)."""
    return [f for f in range(fragments)
            if step - f * (H // fragments) >= H and (step - f * (H // fragments)) % H == 0]


def wait_for_nodes(comm, nodes, timeout=300):
    """Admits joiners until `nodes` nodes train this rail (every admitted rank must take part)."""
    deadline = time.monotonic() + timeout
    while comm.group_size < nodes:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {comm.group_size} of {nodes} nodes arrived")
        if comm.peers_pending():
            comm.update_topology()
        else:
            time.sleep(0.01)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--longhaul-master", required=True, help="the longhaul master's HOST:PORT")
    p.add_argument("--node-name", default=socket.gethostname(), help="this machine's node name (default: host name)")
    p.add_argument("--node-index", type=int, default=0, help="seeds this node's data")
    p.add_argument("--nodes", type=int, default=1, help="wait for this many nodes before training")
    p.add_argument("--H", type=int, default=10)
    p.add_argument("--fragments", type=int, default=1)
    p.add_argument("--quant", default=None)
    p.add_argument("--outer-steps", type=int, default=3)
    p.add_argument("--per-rank-batch", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--inner", choices=["adamw", "sgd"], default="adamw", help="the inner optimizer")
    p.add_argument("--no-diloco", action="store_true", help="the same loop without DiLoCo (for timing)")
    p.add_argument("--time-steps", action="store_true", help="rank 0 prints seconds per inner step after the first H")
    p.add_argument("--outer-log", help="append a JSON line per outer step here ({node} and {rail} are replaced)")
    p.add_argument("--dump", help="torch.save this rank's shards here at the end ({node}, {rail} replaced)")
    a = p.parse_args()

    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # this node's ranks only (MASTER_ADDR/PORT from the launcher)
    model = make_model()
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    opt = make_optimizer(model.parameters(), a.lr, a.inner)
    comm = diloco = None
    if not a.no_diloco:
        # node_rail / node_rails / peer_group default to LOCAL_RANK / LOCAL_WORLD_SIZE.
        comm = longhaul.Communicator(a.longhaul_master, node=a.node_name).connect()
        wait_for_nodes(comm, a.nodes)
        diloco = DiLoCo(model, opt, comm, H=a.H, fragments=a.fragments, quant=a.quant).join()
    steps = a.outer_steps * a.H + (a.fragments - 1) * (a.H // a.fragments)
    t0 = time.perf_counter()
    hook0 = 0.0
    for step in range(1, steps + 1):
        if step == a.H + 1:
            t0 = time.perf_counter()
            hook0 = diloco.hook_seconds if diloco else 0.0
        inputs, targets = batch(a.node_index, step, local_rank, a.per_rank_batch)
        loss = loss_fn(model, inputs, targets)
        loss.backward()
        loss = loss.detach()
        opt.step()  # DiLoCo's hook runs the engine after the inner step
        opt.zero_grad()
        synced = synced_at(step, a.H, a.fragments) if diloco else []
        if synced:
            record = {"node": a.node_name, "rail": local_rank, "step": step, "loss": loss.item(),
                      "engine_hash": diloco.hash(),
                      "shard_hash": {f: shard_hash(model, f, a.fragments) for f in synced}}
            if a.outer_log:
                with open(a.outer_log.format(node=a.node_name, rail=local_rank), "a") as f:
                    f.write(json.dumps(record) + "\n")
            if local_rank == 0:
                print(json.dumps(record), flush=True)
    if a.time_steps and local_rank == 0:
        timed = max(1, steps - a.H)
        hook = (diloco.hook_seconds - hook0) / timed if diloco else 0.0
        print(json.dumps({"seconds_per_step": (time.perf_counter() - t0) / timed,
                          "diloco_seconds_per_step": hook}), flush=True)
    if diloco:
        diloco.close()
        comm.close("done")
    if a.dump:
        torch.save({n: local_tensor(p).detach().clone() for n, p in model.named_parameters()},
                   a.dump.format(node=a.node_name, rail=local_rank))
    dist.destroy_process_group()
    print(f"node {a.node_name} rail {local_rank}/{local_world}: done after {steps} inner steps", flush=True)
    return 0




if __name__ == "__main__":
    sys.exit(main())
