"""A single-process reference of DiLoCo / Streaming DiLoCo (fragments, no delay), written from
docs/training.md: M replicas train on their own data; fragment f's round k >= 1 is launched after
inner step k*H + f*(H//F); the pseudo-gradient mean g = sum_m (theta_g - theta_m) / M is applied by
Nesterov outer SGD (first round b = g; later b = mu*b + g; u = g + mu*b; theta_g -= lr*u), and
every replica's fragment is set to theta_g.
"""
import importlib.util
import os

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples", "python")


def load_example():
    spec = importlib.util.spec_from_file_location("train_fsdp_diloco", os.path.join(EXAMPLES, "train_fsdp_diloco.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def outer_step(theta, replicas, b, lr, mu):
    """One Nesterov round for one parameter tensor; returns the new momentum buffer."""
    g = (theta - replicas[0])
    for r in replicas[1:]:
        g = g + (theta - r)
    g = g / float(len(replicas))
    b = g.clone() if b is None else b * mu + g
    u = g + b * mu
    theta.sub_(u * lr)
    for r in replicas:
        r.copy_(theta)
    return b


def run(ex, nodes, ranks, H, fragments, steps, per_rank, lr, inner, outer_lr=0.7, mu=0.9):
    """Trains `nodes` replicas of the example's model; returns their parameters (lists of tensors)."""
    torch.set_num_threads(1)
    models = [ex.make_model() for _ in range(nodes)]
    opts = [ex.make_optimizer(m.parameters(), lr, inner) for m in models]
    params = [list(m.parameters()) for m in models]
    theta = [p.detach().clone() for p in params[0]]
    bufs = [None] * len(theta)
    for step in range(1, steps + 1):
        for m in range(nodes):
            parts = [ex.batch(m, step, r, per_rank) for r in range(ranks)]
            inputs = torch.cat([p[0] for p in parts])
            targets = torch.cat([p[1] for p in parts])
            ex.loss_fn(models[m], inputs, targets).backward()
            opts[m].step()
            opts[m].zero_grad()
        with torch.no_grad():
            for f in range(fragments):
                offset = step - f * (H // fragments)
                if offset < H or offset % H:
                    continue
                for i in range(f, len(theta), fragments):
                    bufs[i] = outer_step(theta[i], [params[m][i].data for m in range(nodes)], bufs[i], outer_lr, mu)
    return [[p.detach().clone() for p in ps] for ps in params]


def relative_error(got, want):
    num = sum(float((a - b).double().pow(2).sum()) for a, b in zip(got, want))
    den = sum(float(b.double().pow(2).sum()) for b in want)
    return (num / den) ** 0.5
