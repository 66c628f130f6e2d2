"""A sync after idle against a warm one, on a long path (bench/run diloco-wan's warm_over_cold_sync).

A DiLoCo sync follows seconds to minutes of compute in which the data links carry nothing. Linux
then shrinks a loss-based congestion window back towards 10 segments (tcp_slow_start_after_idle),
so the sync climbs out of slow start on every hop; longhaul's data connections use BBR where the
kernel offers it (SocketOptions::congestion_control = "auto"), whose model the kernel leaves alone.

Here 4 members in the packet-level WAN lab (4 sites, every path --rtt-ms round trip at --rate-mbit)
all-reduce the benchmark model's pseudo-gradient with the u8 codec (what a DiLoCo-u8 sync sends):
`warm` ops back to back (only a one-element line-up between them), then `cold` ops each after
IDLE_S of silence on every link. An op's time is its span over the group (the first member's start
to the last member's end, on the machine's one monotonic clock); warm_over_cold_sync = the median
warm span / the median cold span (1: no penalty). The same under CUBIC, forced on every socket by bench/e2e/tcp_cc_preload.c, is printed
beside: what a host whose default is CUBIC gives a library that leaves the choice to the system.
"""
import os
import statistics
import subprocess
import tempfile
from importlib.machinery import SourceFileLoader
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
allreduce = SourceFileLoader("allreduce_bench", os.path.join(HERE, "allreduce")).load_module()
wan = SourceFileLoader("wan_bench", os.path.join(HERE, "wan")).load_module()

IDLE_S = 10
MODEL_PARAMS = 1_058_400  # the benchmark GPT (bench/e2e/diloco_runs.py)


def one_setting(bench, lab, label, preload, cc, warm_ops, cold_ops, log):
    """Median warm and cold op times with `cc` forced (None: longhaul's own choice)."""
    saved = {k: os.environ.get(k) for k in ("LD_PRELOAD", "LH_BENCH_TCP_CC")}
    if cc:
        os.environ["LD_PRELOAD"], os.environ["LH_BENCH_TCP_CC"] = preload, cc
    try:
        nbytes = MODEL_PARAMS * 4
        warm = bench.longhaul(4, nbytes, warm_ops, 2, "u8", "auto", lab=lab)
        cold = bench.longhaul(4, nbytes, cold_ops, 2, "u8", "auto", lab=lab,
                              worker_args=["--idle-ms", str(IDLE_S * 1000)])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    ws, cs = warm["group_spans_s"], cold["group_spans_s"]
    w, c = statistics.median(ws), statistics.median(cs)
    log(f"  {label}: warm {w * 1e3:.0f} ms (spans {fmt(ws)}), after {IDLE_S} s idle {c * 1e3:.0f} ms "
        f"(spans {fmt(cs)}): {w / c:.3f}")
    return {"warm_median_s": round(w, 6), "cold_median_s": round(c, 6), "warm_over_cold": round(w / c, 4),
            "warm_spans_s": ws, "cold_spans_s": cs,
            "warm_rank0_times_s": warm["times_s_rank0"], "cold_rank0_times_s": cold["times_s_rank0"]}


def fmt(spans):
    return " ".join(f"{s * 1e3:.0f}" for s in spans)


def measure(build, log, rtt_ms=100, rate_mbit=1000, warm_ops=9, cold_ops=6, connections=8):
    """The figures as one dict (fields named for bench/run diloco-wan)."""
    wanem = os.path.join(build, "tools/longhaul-wanem/longhaul-wanem")
    tmp = tempfile.mkdtemp(prefix="lh-warm-sync-")
    preload = wan.build_cc_preload(tmp)
    bench = allreduce.Bench(SimpleNamespace(connections=connections, segment_bytes=0), build)
    out = {"warm_sync_path": f"WAN lab, 4 sites, {rtt_ms} ms RTT, {rate_mbit} Mbit/s per path",
           "warm_sync_bytes_f32": MODEL_PARAMS * 4, "warm_sync_codec": "u8", "warm_sync_idle_s": IDLE_S,
           "warm_sync_connections": connections}
    with wan.Lab(wanem, 4, rtt_ms, rate_mbit) as lab:
        # The namespaces' default made CUBIC where the kernel allows it, so that "auto" is seen
        # choosing BBR over a loss-based default (on this host the default may already be BBR).
        try:
            lab.set_sysctl("net.ipv4.tcp_congestion_control", "cubic")
        except subprocess.CalledProcessError as e:
            log(f"  the lab's default congestion control stays as it is: {e}")
        out["warm_sync_lab_default_cc"] = lab.sysctl(0, "net.ipv4.tcp_congestion_control")
        mine = one_setting(bench, lab, "longhaul's choice (auto)", preload, None, warm_ops, cold_ops, log)
        cubic = one_setting(bench, lab, "CUBIC forced", preload, "cubic", warm_ops, cold_ops, log)
    allreduce.reap_all()
    out.update({"warm_over_cold_sync": mine["warm_over_cold"], "warm_sync_auto": mine,
                "warm_over_cold_sync_cubic": cubic["warm_over_cold"], "warm_sync_cubic": cubic,
                "warm_over_cold_sync_target": 0.9})
    return out

