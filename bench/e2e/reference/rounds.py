"""The outer rules checked exactly: longhaul's peers dump their parameters around each sync
(longhaul-train --dump-dir/--dump-steps: θ_m before the engine's step, θ_g and θ_m after it);
the reference's OuterLoop replays those steps with the peers' own θ_m, forms each round's Δ from
them and applies its own outer rule, and its θ_g (and each peer's θ_m after the merge or
restart) must match longhaul's to `TOLERANCE` relative: max |ours - longhaul's| / max |longhaul's|.
The only expected difference is the order of the all-reduce's f32 sum (ring versus sequential).
"""
import os

import numpy as np
import torch

from .methods import OuterLoop, fragment_indices

TOLERANCE = 1e-6


def event_steps(spec, rounds, last_step):
    """The steps at which the engine launches or applies one of the first `rounds` rounds of
    every fragment (CO2 and eager: round k is applied at round k + 1's launch)."""
    steps = set()
    if spec.delayed:
        steps.update(k * spec.H for k in range(1, rounds + 2))
    else:
        off = spec.H // spec.fragments
        for f in range(spec.fragments):
            for k in range(1, rounds + 1):
                launch = k * spec.H + f * off
                steps.update((launch, launch + spec.tau))
    return sorted(s for s in steps if s <= last_step)


def _load(d, name):
    return torch.from_numpy(np.fromfile(os.path.join(d, name + ".bin"), dtype="<f4"))


def _rel(ours, theirs):
    scale = theirs.abs().max().item()
    return (ours - theirs).abs().max().item() / (scale if scale > 0 else 1.0)


def check(dump_dirs, spec, cfg, steps, with_close):
    """Replays the dumped steps; returns {worst relative differences, what was compared}."""
    theta0 = _load(dump_dirs[0], "init")
    loop = OuterLoop(spec, theta0, len(dump_dirs), fragment_indices(cfg, spec.fragments))
    worst_g = worst_local = 0.0
    per_step = []
    for s in steps:
        locals_ = [_load(d, f"step-{s}-local") for d in dump_dirs]
        loop.step(s, locals_)
        globals_ = [_load(d, f"step-{s}-global") for d in dump_dirs]
        if any(not torch.equal(globals_[0], g) for g in globals_[1:]):
            raise RuntimeError(f"step {s}: longhaul's peers dumped different theta_g")
        g = _rel(loop.theta_g, globals_[0])
        x = max(_rel(locals_[m], _load(d, f"step-{s}-restart")) for m, d in enumerate(dump_dirs))
        per_step.append({"step": s, "theta_g": g, "local": x})
        worst_g, worst_local = max(worst_g, g), max(worst_local, x)
    if with_close:
        loop.close([_load(d, f"step-{steps[-1]}-restart") for d in dump_dirs])
        g = _rel(loop.theta_g, _load(dump_dirs[0], "final-global"))
        per_step.append({"step": "close", "theta_g": g})
        worst_g = max(worst_g, g)
    return {"theta_g_max_rel_diff": worst_g, "local_max_rel_diff": worst_local,
            "steps_compared": len(steps), "rounds_applied": sum(loop.rounds),
            "per_step": per_step, "ok": worst_g <= TOLERANCE and worst_local <= TOLERANCE}
