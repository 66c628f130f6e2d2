import importlib.machinery, os, sys, json, types, glob, re
HERE = os.path.abspath("bench/e2e")
ab = importlib.machinery.SourceFileLoader("allreduce_bench", os.path.join(HERE, "allreduce")).load_module()
a = types.SimpleNamespace(connections=1, segment_bytes=0, iterations=4, warmup=1)
b = ab.Bench(a, os.path.abspath(os.environ["LONGHAUL_BUILD"]))
os.environ["LONGHAUL_LOG"] = "debug"
rows = [
  ("A cuda u8 auto n2", 2, "u8", "auto", ("--device", "cuda", "--dtype", "f32")),
  ("C cuda u8 auto n2 no-restore", 2, "u8", "auto", ("--device", "cuda", "--dtype", "f32", "--no-restore")),
]
for name, n, codec, sched, wa in rows:
    try:
        r = b.longhaul(n, int(os.environ.get("BYTES", 1 << 30)), 4, 1, codec, sched, worker_args=wa)
        print(name, r["time_s"], r["times_s_rank0"], r.get("schedule_used"), "cpu", r.get("cpu_s_per_op_all_ranks"), flush=True)
    except Exception as e:
        print(name, "ERROR", str(e)[-300:], flush=True)
    for f in sorted(glob.glob(os.path.join(b.tmp, "*"))):
        if not f.endswith(".err") and "err" not in os.path.basename(f): continue
        lines = [l.rstrip() for l in open(f, errors="replace") if '[gpu]' in l or ' gpu' in l or 'gpu:' in l]
        print("==", os.path.basename(f), len(lines)); print("\n".join(lines[:40]))
        os.remove(f)
