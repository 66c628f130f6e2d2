import importlib.machinery, os, sys, json, types
HERE = os.path.abspath("bench/e2e")
ab = importlib.machinery.SourceFileLoader("allreduce_bench", os.path.join(HERE, "allreduce")).load_module()
a = types.SimpleNamespace(connections=1, segment_bytes=0, iterations=5, warmup=1)
b = ab.Bench(a, os.path.abspath(os.environ["LONGHAUL_BUILD"]))
rows = [
  ("A cuda u8 auto n2", 2, "u8", "auto", ("--device", "cuda", "--dtype", "f32")),
  ("B cpu u8 auto n2", 2, "u8", "auto", ("--device", "cpu", "--dtype", "f32")),
  ("C cuda u8 auto n2 no-restore", 2, "u8", "auto", ("--device", "cuda", "--dtype", "f32", "--no-restore")),
  ("D cuda u8 ring n2", 2, "u8", "ring", ("--device", "cuda", "--dtype", "f32")),
  ("E cpu u8 ring n2", 2, "u8", "ring", ("--device", "cpu", "--dtype", "f32")),
  ("F cuda none auto n2 f32", 2, "none", "auto", ("--device", "cuda", "--dtype", "f32")),
  ("G cuda u8 auto n4", 4, "u8", "auto", ("--device", "cuda", "--dtype", "f32")),
  ("H cpu u8 auto n4", 4, "u8", "auto", ("--device", "cpu", "--dtype", "f32")),
]
for name, n, codec, sched, wa in rows:
    try:
        r = b.longhaul(n, int(os.environ.get("BYTES", 1 << 30)), 5, 1, codec, sched, worker_args=wa)
        print(name, r["time_s"], r["times_s_rank0"], r.get("schedule_used"), "cpu", r.get("cpu_s_per_op_all_ranks"), flush=True)
    except Exception as e:
        print(name, "ERROR", str(e)[-300:], flush=True)
