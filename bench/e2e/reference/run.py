"""The reference's methods under the benchmark's keys, and a CLI that runs one of them.

    python3 -m reference.run KEY [--batch B --steps S --H H --outer-lr LR --seed N ...]

prints one JSON object (the validation curve of theta_g and its final value) on its last line.
The keys and their settings are bench/run diloco's f32 methods (docs/training.md, "One protocol
for every method"): dp; diloco_h50_f32 (Nesterov, lr 0.7, momentum 0.9); streaming (F = 4,
tau = 1, alpha = 0); co2 (alpha_o 1.0, beta 0.2); eager (Nesterov 0.7 / 0.9).
"""
import argparse
import json
import sys
import time

import torch

from . import corpus, methods, model

PEERS = 4


def spec_for(key, H, outer_lr=None, **extra):
    """The reference's Spec of a benchmark key; H and the outer lr as the benchmark sets them."""
    base = {"diloco_h50_f32": methods.Spec("diloco", H),
            "diloco_h100_f32": methods.Spec("diloco", H),
            "streaming": methods.Spec("diloco", H, fragments=4, tau=1),
            "co2": methods.Spec("co2", H, lr=1.0, mu=0.2),
            "eager": methods.Spec("eager", H)}.get(key)
    if base is None:
        raise KeyError(f"the reference has no method {key!r}")
    if outer_lr is not None:
        base.lr = outer_lr
    for k, v in extra.items():
        setattr(base, k, v)
    return base


def run(key, cfg, data, H=None, outer_lr=None, val_every=100, peers=PEERS, log=None, spec_extra=None):
    """One method from the same initial parameters; {val_loss, curve, wall_s, ...}."""
    torch.set_num_threads(cfg.threads)
    t0 = time.monotonic()
    theta0 = model.initial_parameters(cfg)
    ev = model.Evaluator(cfg, data)
    if key == "dp":
        curve, theta = methods.run_dp(cfg, data, peers, theta0, ev.loss, val_every, log)
        spec = None
    else:
        spec = spec_for(key, H, outer_lr, **(spec_extra or {}))
        curve, theta = methods.run_outer(cfg, data, peers, spec, theta0, ev.loss, val_every, log)
    final = curve[-1][1]
    return {"key": key, "val_loss": round(final, 6), "finite": bool(torch.isfinite(theta).all()),
            "curve": [[s, round(v, 6)] for s, v in curve], "spec": spec.__dict__ if spec else None,
            "steps": cfg.steps, "batch": cfg.batch, "peers": peers, "seed": cfg.seed,
            "tokens": cfg.steps * cfg.batch * cfg.context * peers,
            "wall_s": round(time.monotonic() - t0, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("key")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--H", type=int, default=50)
    ap.add_argument("--outer-lr", type=float)
    ap.add_argument("--estimate", choices=["paper", "own"], help="eager's estimate of the mean")
    ap.add_argument("--co2-gap-penalty", type=float, help="CO2's lambda (default 1)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--val-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--channels", type=int, default=144)
    ap.add_argument("--data", help="the corpus directory (default: Python's standard library)")
    a = ap.parse_args()
    cfg = model.Config(layers=a.layers, channels=a.channels, batch=a.batch, steps=a.steps,
                       warmup=a.warmup, seed=a.seed, threads=a.threads)
    r = run(a.key, cfg, corpus.Corpus(a.data), a.H, a.outer_lr, a.val_every,
            log=lambda m: print(m, file=sys.stderr, flush=True),
            spec_extra={k: v for k, v in (("estimate", a.estimate), ("gap_penalty", a.co2_gap_penalty))
                        if v is not None} or None)
    print(json.dumps(r))


if __name__ == "__main__":
    main()
