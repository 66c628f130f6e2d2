import importlib.machinery, os, types, glob
HERE = os.path.abspath("bench/e2e")
ab = importlib.machinery.SourceFileLoader("allreduce_bench", os.path.join(HERE, "allreduce")).load_module()
a = types.SimpleNamespace(connections=1, segment_bytes=0, iterations=4, warmup=1)
os.environ["LONGHAUL_LOG"] = "debug"
builds = {"before": ab.Bench(a, os.path.abspath("build/gpu-before")), "after": ab.Bench(a, os.path.abspath("build/gpu-pack"))}
nbytes = int(os.environ.get("BYTES", 1 << 30))
for rnd in range(2):
    for side in ("before", "after"):
        for n in (2, 4):
            b = builds[side]
            try:
                r = b.longhaul(n, nbytes, 4, 1, "u8", "auto", worker_args=("--device", "cuda", "--dtype", "f32"))
                print(side, f"n{n}", "u8 restore", r["time_s"], r["times_s_rank0"], r.get("schedule_used"), flush=True)
            except Exception as e:
                print(side, f"n{n}", "ERROR", str(e)[-300:], flush=True)
            for f in sorted(glob.glob(os.path.join(b.tmp, "*r0.err"))):
                print("   ", [l.split("] ")[-1].strip() for l in open(f, errors="replace") if "landing" in l])
            for f in glob.glob(os.path.join(b.tmp, "*")): os.remove(f)
