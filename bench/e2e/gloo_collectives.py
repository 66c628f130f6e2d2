#!/usr/bin/env python3
"""The reference for `bench/run collectives`: torch.distributed's gloo (CPU) on the same tensors.

One process per rank (so each can run in its own network namespace, bench/e2e/netlab.py):

    gloo_collectives.py --collective C --rank R --world N --master-addr A --master-port P --ifname IF ...

C is allgather (all_gather_single: each rank contributes --bytes / N of f32, the gathered tensor is
--bytes), reduce_scatter (reduce_scatter_single, sum: each rank's input is --bytes, each receives
--bytes / N) or barrier. --warmup untimed ops, then --iterations timed ones, each preceded by an
untimed barrier (as the longhaul worker lines its members up). Prints one JSON line: {"rank",
"world", "bytes", "collective", "times_s", "median_s", "result_ok", ...}. GLOO_SOCKET_IFNAME is
--ifname; torch threads = max(1, cores // N).
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time


def values(r, begin, end, torch):
    """Rank r's values at elements begin..end (small integers, exact in f32 sums), as the longhaul
    worker's."""
    return ((torch.arange(begin, end, dtype=torch.int32) * 7 + r * 13) % 64).to(torch.float32)


def make_op(a, torch, dist):
    """The timed op, and a check of its result at 1000 sampled elements."""
    n, part = a.world, a.bytes // 4 // a.world
    sample = list(range(0, part * n, max(1, part * n // 1000)))
    if a.collective == "allgather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        inp = values(a.rank, a.rank * part, (a.rank + 1) * part, torch)
        out = torch.zeros(part * n, dtype=torch.float32)
        return (lambda: gather(out, inp)), lambda: all(
            float(out[i]) == (i * 7 + (i // part) * 13) % 64 for i in sample)
    if a.collective == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        inp = values(a.rank, 0, part * n, torch)
        out = torch.zeros(part, dtype=torch.float32)
        mine = [i for i in sample if i < part]
        return (lambda: scatter(out, inp)), lambda: all(
            float(out[i]) == sum(((a.rank * part + i) * 7 + r * 13) % 64 for r in range(n)) for i in mine)
    return dist.barrier, lambda: True


def rank_main(a):
    os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    import torch
    import torch.distributed as dist
    threads = max(1, (os.cpu_count() or 1) // a.world)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://{a.master_addr}:{a.master_port}", rank=a.rank,
                            world_size=a.world, timeout=datetime.timedelta(seconds=a.timeout))
    try:
        op, check = make_op(a, torch, dist)
        times = []
        for it in range(a.warmup + a.iterations):
            dist.barrier()
            t0 = time.perf_counter()
            op()
            if it >= a.warmup:
                times.append(time.perf_counter() - t0)
        ok = check()
        dist.barrier()
    finally:
        dist.destroy_process_group()
    print(json.dumps({"rank": a.rank, "world": a.world, "bytes": a.bytes, "collective": a.collective,
                      "times_s": times, "median_s": statistics.median(times), "torch_threads": threads,
                      "torch_version": torch.__version__, "ifname": a.ifname, "result_ok": ok}), flush=True)
    return 0 if ok else 3


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collective", choices=("allgather", "reduce_scatter", "barrier"), required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29500)
    p.add_argument("--ifname", default="lo")
    p.add_argument("--bytes", type=int, default=256 << 20)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--timeout", type=int, default=300, help="seconds; gloo's collective timeout")
    a = p.parse_args()
    if a.bytes % (4 * a.world):
        p.error("--bytes must be a multiple of 4 * --world (f32 parts)")
    return rank_main(a)


if __name__ == "__main__":
    sys.exit(main())
