#!/usr/bin/env python3
"""The reference for `bench/run allreduce`: torch.distributed's gloo all_reduce (CPU), timed.

One process per rank, so that each rank can be started inside its own network namespace with
`ip netns exec` (bench/e2e/netlab.py):

    gloo_allreduce.py --rank R --world N --master-addr ADDR --master-port PORT --ifname IF ...

runs rank R: init_process_group("gloo", init_method=tcp://ADDR:PORT), a tensor of --bytes of f32
(ones; --dtype bf16 and --device cuda change that), --warmup untimed all_reduces, then --iterations timed ones, each preceded by a barrier
(not timed). Prints one JSON line: {"rank", "world", "bytes", "times_s", "median_s", ...}.
GLOO_SOCKET_IFNAME is set to --ifname (lo on loopback, veth0 in the lab). torch threads =
max(1, cores // N).

Without --rank it is a loopback launcher: starts the N ranks itself on 127.0.0.1 and prints
rank 0's JSON line (for trying it by hand).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def process_cpu_s():
    """CPU time of this process, every thread, user and system."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def rank_main(a):
    os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    import torch
    import torch.distributed as dist
    threads = max(1, (os.cpu_count() or 1) // a.world)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://{a.master_addr}:{a.master_port}", rank=a.rank,
                            world_size=a.world, timeout=__import__("datetime").timedelta(seconds=a.timeout))
    try:
        dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
        t = torch.ones(a.bytes // dtype.itemsize, dtype=dtype, device=a.device)
        for _ in range(a.warmup):
            dist.barrier()
            dist.all_reduce(t)
        times, cpu = [], 0.0
        for _ in range(a.iterations):
            dist.barrier()
            t0, c0 = time.perf_counter(), process_cpu_s()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
            cpu += process_cpu_s() - c0
        # Every element is world ** (warmup + iterations): a cheap check that the sums happened.
        expect = float(a.world) ** (a.warmup + a.iterations)
        ok = abs(float(t[0]) - expect) <= 1e-3 * expect and abs(float(t[-1]) - expect) <= 1e-3 * expect
        dist.barrier()
    finally:
        dist.destroy_process_group()
    print(json.dumps({"rank": a.rank, "world": a.world, "bytes": a.bytes, "device": a.device,
                      "dtype": a.dtype, "times_s": times,
                      "median_s": statistics.median(times),
                      "cpu_s_per_op": cpu / len(times), "torch_threads": threads,
                      "torch_version": torch.__version__, "ifname": a.ifname, "result_ok": ok}), flush=True)
    return 0 if ok else 3


def launcher_main(a):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    try:
        for r in range(a.world):
            cmd = [sys.executable, __file__, "--rank", str(r), "--world", str(a.world), "--master-addr", "127.0.0.1",
                   "--master-port", str(port), "--ifname", "lo", "--bytes", str(a.bytes), "--iterations",
                   str(a.iterations), "--warmup", str(a.warmup), "--timeout", str(a.timeout),
                   "--device", a.device, "--dtype", a.dtype]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=a.timeout + 60)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode != 0 for p in procs):
        print(f"ranks exited {[p.returncode for p in procs]}", file=sys.stderr)
        return 1
    print(outs[0].strip().splitlines()[-1])
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29500)
    p.add_argument("--ifname", default="lo")
    p.add_argument("--bytes", type=int, default=256 << 20)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--timeout", type=int, default=300, help="seconds; gloo's collective timeout")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the tensor lives (gloo stages CUDA tensors through host memory)")
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    a = p.parse_args()
    if a.bytes % 4:
        p.error("--bytes must be a multiple of 4")
    return rank_main(a) if a.rank is not None else launcher_main(a)


if __name__ == "__main__":
    sys.exit(main())
