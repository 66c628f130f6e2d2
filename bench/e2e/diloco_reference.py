"""bench/run diloco --reference: the f32 methods in the independent reference
(bench/e2e/reference) beside longhaul's runs, the tolerance they are held to, and the exact check
of the outer rules on longhaul's own rounds. Imported by bench/e2e/diloco.

- `ref_<key>_loss` and `<key>_loss_vs_ref` for the keys of REF_KEYS;
- `ref_tolerance` = max(0.5%, 3 x the relative spread of two longhaul runs of DiLoCo H = 50 f32
  that differ only in float noise: 1 and 2 threads per peer); a ratio outside 1 +- tolerance is a
  bug to find (printed as such), not a number to report;
- `outer_rules_check`: in the loopback runs of the f32 engine methods, the peers dump their
  parameters around each sync of the first rounds; the reference's outer rule, fed with the
  pseudo-gradients formed from those dumps, must reproduce theta_g to 1e-6 relative.
"""
import math
import os
import shutil
import sys

import diloco_runs as runs
from diloco_runs import log
from reference import corpus, model, rounds
from reference import run as ref_run

REF_KEYS = ["dp", "diloco_h50_f32", "streaming", "co2", "eager"]
CHECKED_ROUNDS = 5  # rounds of theta_g checked exactly (over all fragments)
TOLERANCE_FLOOR = 0.005


def ref_config(p, seed):
    m = p["model"]
    size = {k: int(m[m.index("--" + k) + 1]) for k in ("layers", "channels", "heads")}
    return model.Config(batch=p["batch"], steps=p["steps"], warmup=p["warmup"], seed=seed,
                        context=p["context"], val_batches=p["val_batches"], threads=1, **size)


def spec_of(p, key):
    return ref_run.spec_for(key, runs.h_of(p, key), p.get("outer_lr") if key != "co2" else None)


def dump_flags(p, key, dump_dir):
    """longhaul-train flags that dump the first CHECKED_ROUNDS rounds' syncs of an f32 engine
    method (an empty list for the others)."""
    if key not in REF_KEYS or key == "dp":
        return [], []
    spec = spec_of(p, key)
    per_fragment = math.ceil(CHECKED_ROUNDS / spec.fragments)
    steps = rounds.event_steps(spec, per_fragment, p["steps"])
    return ["--dump-dir", dump_dir, "--dump-steps", ",".join(map(str, steps))], steps


def check_rounds(p, key, dump_dirs, steps):
    spec = spec_of(p, key)
    r = rounds.check(dump_dirs, spec, ref_config(p, 1), steps, with_close=steps[-1] == p["steps"])
    r.pop("per_step")
    log(f"  outer rules of {key}: theta_g max rel diff {r['theta_g_max_rel_diff']:.3g} over "
        f"{r['rounds_applied']} rounds ({'ok' if r['ok'] else 'MISMATCH'}, tol {rounds.TOLERANCE})")
    for d in dump_dirs:
        shutil.rmtree(d, ignore_errors=True)
    return r


def reference_runs(p, seed, keys):
    """Each key in the reference, under the protocol p; {key: result}."""
    data = corpus.Corpus()
    out = {}
    for key in [k for k in REF_KEYS if k in keys]:
        log(f"reference: {key} ({p['steps']} steps x {runs.PEERS} replicas) ...")
        try:
            r = ref_run.run(key, ref_config(p, seed), data, runs.h_of(p, key),
                            p.get("outer_lr") if key not in ("dp", "co2") else None, p["val_every"])
            log(f"  reference {key}: val {r['val_loss']:.4f} [{r['wall_s']} s]")
        except (RuntimeError, ValueError) as e:
            r = {"error": str(e)[:1500]}
        out[key] = r
    return out


def tolerance(bench, seed, one_thread):
    """The float-noise spread: DiLoCo H = 50 f32 again with 2 threads per peer."""
    p2 = dict(bench.p, threads=2)
    log("reference tolerance: diloco_h50_f32 with 2 threads per peer ...")
    peers, _ = bench.group("diloco_h50_f32", seed, p2["steps"], protocol=p2)
    two = peers[0]["final_val_loss"]
    spread = abs(two - one_thread) / one_thread
    tol = max(TOLERANCE_FLOOR, 3 * spread)
    log(f"  1 thread {one_thread:.5f}, 2 threads {two:.5f}: spread {spread:.5f}, tolerance {tol:.4f}")
    return {"ref_tolerance": round(tol, 5), "ref_tolerance_terms": {
        "diloco_h50_f32_val_loss_1_thread": one_thread, "diloco_h50_f32_val_loss_2_threads": two,
        "relative_spread": round(spread, 6), "floor": TOLERANCE_FLOOR}}


def confirm_grid(bench, grid_path, cells):
    """longhaul's DiLoCo f32 at grid cells (batch, H, outer lr), each under that cell's protocol
    (the grid's tokens, warmup a sixth of the steps), against the reference's loss there."""
    import json
    with open(grid_path) as f:
        grid = json.load(f)
    out = {}
    for batch, H, lr in cells:
        ref = next(c for c in grid["cells"] if c["batch"] == batch and c["H"] == H and c["outer_lr"] == lr)
        steps = ref["steps"]
        protocol = dict(bench.p, batch=batch, steps=steps, warmup=steps // 6, outer_lr=lr,
                        val_every=max(1, steps // 6), val_batches=16 * 16 // batch)
        key = f"diloco_h{H}_f32"
        log(f"confirm grid cell batch {batch}, H {H}, outer lr {lr} ({steps} steps) ...")
        peers, _ = bench.group(key, grid["seed"], steps, protocol=protocol)
        ours = peers[0]["final_val_loss"]
        name = f"grid_b{batch}_h{H}_lr{lr:g}"
        out[name] = {"longhaul_loss": ours, "ref_loss": ref["val_loss"],
                     "loss_vs_ref": round(ours / ref["val_loss"], 5)}
        log(f"  {name}: longhaul {ours:.5f}, reference {ref['val_loss']:.5f}, "
            f"ratio {ours / ref['val_loss']:.5f}")
    return out


def fields(loop, refs, tol, checks):
    """The --reference fields of the result: raw losses beside every ratio."""
    out = dict(tol)
    bound = tol["ref_tolerance"]
    out["ref_outside_tolerance"] = []
    for key, r in refs.items():
        ours = (loop.get(key) or {}).get("val_loss")
        ref = r.get("val_loss")
        out[f"ref_{key}_loss"] = ref
        out[f"{key}_loss_vs_ref"] = round(ours / ref, 5) if ours and ref else None
        if ours and ref and abs(ours / ref - 1) > bound:
            out["ref_outside_tolerance"].append(key)
    out["ref_curves"] = {k: r.get("curve") for k, r in refs.items()}
    out["outer_rules_check"] = checks
    out["outer_rules_check_ok"] = all(c.get("ok") for c in checks.values()) if checks else None
    return out


if __name__ == "__main__":
    sys.exit("imported by bench/e2e/diloco")
