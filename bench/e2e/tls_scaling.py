"""bench/e2e/link's TLS scaling rounds (issue 26): does a TLS link cost more CPU per byte as it
stripes over more connections, and how does TLS at K = 4 compare with iperf3 measured beside it.

Loopback TLS throughput swings by +-30% between runs on 2 cores, so every figure is paired within
a round and the ratios are medians of per-round ratios:
  - CPU seconds per GiB moved (user + system, both processes) at K = 1 and K = 8 back to back, the
    order alternating by round, then K = 4; `k8_over_k1` is the round's K = 8 / K = 1;
  - TLS K = 4 Gbit/s and iperf3's single stream (the same byte count) back to back, the order
    alternating by round; `k4_vs_iperf3` is the round's ratio.
With a baseline build, each round runs both builds (the first alternating by round) and each build
gets its own iperf3 run beside its K = 4.

Each measurement starts a fresh linkperf server and warms it with one untimed transfer of the same
size: the server fills its receive buffer on the first request, which is setup, not transfer. The
client reports its own CPU over the timed transfers (linkperf --json `cpu_s`); the server's is read
from /proc over the timed client's whole run (its connection handshakes included, a few ms).
"""
import json
import os
import statistics
import subprocess

KS = (1, 4, 8)
TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid):
    """User + system CPU seconds of process `pid`, all its threads (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def measure_tls(binary, k, args, server_factory):
    """One timed TLS linkperf client run at K = k against a fresh, warmed server: Gbit/s (median
    over the iterations) and CPU seconds per GiB moved (both processes)."""
    server = server_factory()
    try:
        cmd = [binary, "client", "--connect", f"127.0.0.1:{server.port}", "-k", str(k), "--bytes",
               str(args.bytes), "--threads", str(args.threads), "--json", "--tls"]
        subprocess.run(cmd + ["--iterations", "1"], capture_output=True, timeout=600, check=True)
        before = process_cpu_s(server.proc.pid)
        out = subprocess.run(cmd + ["--iterations", str(args.iterations)], capture_output=True, text=True,
                             timeout=600)
        server_cpu = process_cpu_s(server.proc.pid) - before
    finally:
        server.close()
    if out.returncode != 0:
        raise RuntimeError(f"linkperf failed: {out.stderr.strip()}")
    run = json.loads(out.stdout.strip().splitlines()[-1])
    gib = args.bytes * args.iterations / (1 << 30)
    return {"gbps": run["gbps_median"], "cpu_s_per_gib": (run["cpu_s"] + server_cpu) / gib,
            "client_cpu_s": run["cpu_s"], "server_cpu_s": round(server_cpu, 3)}


def one_round(binary, index, args, server_factory, iperf3, log, tag):
    """K = 1 and K = 8 back to back, then K = 4 and iperf3 back to back; orders alternate by round."""
    runs = {}
    for k in ((1, 8) if index % 2 == 0 else (8, 1)):
        runs[k] = measure_tls(binary, k, args, server_factory)
    if index % 2 == 0:
        runs[4] = measure_tls(binary, 4, args, server_factory)
        reference = iperf3(args.bytes * args.iterations)
    else:
        reference = iperf3(args.bytes * args.iterations)
        runs[4] = measure_tls(binary, 4, args, server_factory)
    r = {f"cpu_s_per_gib_k{k}": round(runs[k]["cpu_s_per_gib"], 3) for k in KS}
    r["k8_over_k1"] = round(runs[8]["cpu_s_per_gib"] / runs[1]["cpu_s_per_gib"], 3)
    r.update({f"gbps_k{k}": runs[k]["gbps"] for k in KS})
    r["iperf3_gbps"] = round(reference, 3)
    r["k4_vs_iperf3"] = round(runs[4]["gbps"] / reference, 3)
    r["server_cpu_s"] = {f"k{k}": runs[k]["server_cpu_s"] for k in KS}
    r["client_cpu_s"] = {f"k{k}": runs[k]["client_cpu_s"] for k in KS}
    log(f"tls scaling round {index + 1}{tag}: CPU s/GiB K=1 {r['cpu_s_per_gib_k1']:.3f}, "
        f"K=4 {r['cpu_s_per_gib_k4']:.3f}, K=8 {r['cpu_s_per_gib_k8']:.3f} (K8/K1 {r['k8_over_k1']:.3f}); "
        f"TLS K=4 {r['gbps_k4']:.2f} Gbit/s, iperf3 {reference:.2f} ({r['k4_vs_iperf3']:.3f}x)")
    return r


def summary(rounds, prefix):
    """The result fields: raw medians over the rounds, ratios as medians of per-round ratios."""
    med = lambda key: round(statistics.median(r[key] for r in rounds), 3)  # noqa: E731
    out = {f"{prefix}tls_cpu_s_per_gib_k{k}": med(f"cpu_s_per_gib_k{k}") for k in KS}
    out[f"{prefix}tls_cpu_s_per_gib_k8_over_k1"] = med("k8_over_k1")
    out[f"{prefix}tls_k4_gbps"] = med("gbps_k4")
    out[f"{prefix}tls_k4_iperf3_gbps"] = med("iperf3_gbps")
    out[f"{prefix}tls_k4_vs_iperf3"] = med("k4_vs_iperf3")
    out[f"{prefix}tls_scaling_rounds"] = rounds
    return out


def run(builds, args, log, iperf3):
    """builds: [(prefix, binary, server_factory)], the current build first (prefix "") and
    optionally the baseline ("baseline_"). Returns the result fields of every build."""
    rounds = {prefix: [] for prefix, _, _ in builds}
    for i in range(args.tls_rounds):
        order = builds if i % 2 == 0 else builds[::-1]
        for prefix, binary, server_factory in order:
            tag = f" ({prefix.rstrip('_')})" if prefix else (" (current)" if len(builds) > 1 else "")
            rounds[prefix].append(one_round(binary, i, args, server_factory, iperf3, log, tag))
    out = {"tls_scaling_settings": {
        "rounds": args.tls_rounds, "bytes": args.bytes, "iterations": args.iterations,
        "io_threads": args.threads,
        "cpu": "user + system seconds of the linkperf client (timed transfers) and server (/proc, the "
               "timed client's run) per GiB moved; each run against a fresh server warmed by one "
               "untimed transfer"}}
    for prefix, _, _ in builds:
        out.update(summary(rounds[prefix], prefix))
    return out
