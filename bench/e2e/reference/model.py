"""The GPT of longhaul-train in PyTorch (tests/python/train/torch_gpt.py, the twin that the parity
test checks against ours), initialised as longhaul-train initialises it, and the inner loop that
every replica runs: forward, backward, clipping to global norm 1, AdamW (torch.optim.AdamW) with
longhaul-train's warmup + cosine schedule. Each replica's parameters are views into one flat f32
vector in longhaul-train's layout (the order of torch_gpt.PARAM_SHAPES), so the outer rules see
the same flat vectors as the engine.
"""
import math
import os
import sys

import numpy as np
import torch

from . import corpus

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "python", "train"))
from torch_gpt import DECAY, PARAM_SHAPES, TorchGpt  # noqa: E402

VOCAB = 256


class Config:
    """The protocol's figures that the inner loop needs (longhaul-train's flags and defaults)."""

    def __init__(self, layers=4, channels=144, heads=4, context=128, batch=4, steps=300, warmup=50,
                 max_lr=3e-3, min_lr=3e-4, seed=1, val_batches=None, threads=1):
        self.layers, self.channels, self.heads, self.context = layers, channels, heads, context
        self.batch, self.steps, self.warmup = batch, steps, warmup
        # float32 like longhaul-train's LrSchedule fields, then the schedule in double.
        self.max_lr, self.min_lr = float(np.float32(max_lr)), float(np.float32(min_lr))
        self.seed = seed
        self.data_seed = seed ^ 0x5EEDDA7A
        self.val_batches = val_batches or max(1, 16 * 16 // batch)
        self.threads = threads

    def lr_at(self, step):
        """longhaul-train's LrSchedule::at (steps from 0), rounded to f32 as it returns."""
        if step < self.warmup:
            lr = self.max_lr * (step + 1) / self.warmup
        elif step >= self.steps or self.steps <= self.warmup:
            lr = self.min_lr
        else:
            progress = (step - self.warmup) / (self.steps - self.warmup)
            lr = self.min_lr + (self.max_lr - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return float(np.float32(lr))


def shapes(cfg):
    V, T, L, C = VOCAB, cfg.context, cfg.layers, cfg.channels
    return [(name, fn(V, T, L, C)) for name, fn in PARAM_SHAPES]


def initial_parameters(cfg):
    """longhaul-train's init_parameters: per tensor i of the layout, weights that decay are
    N(0, 0.02) (the residual projections N(0, 0.02 / sqrt(2 L))) drawn with Rng(mix_seed(seed, i));
    norm weights 1; biases 0. One flat f32 vector."""
    parts = []
    residual_std = 0.02 / math.sqrt(2.0 * cfg.layers)
    for i, (name, shape) in enumerate(shapes(cfg)):
        n = int(np.prod(shape))
        if name not in DECAY:
            parts.append(np.full(n, 1.0 if name in ("ln1_w", "ln2_w", "lnf_w") else 0.0, np.float32))
            continue
        std = residual_std if name in ("attproj_w", "fcproj_w") else 0.02
        parts.append((std * corpus.normals(corpus.mix_seed(cfg.seed, i), n)).astype(np.float32))
    return torch.from_numpy(np.concatenate(parts))


class Replica:
    """One peer's model and inner optimizer; `flat` holds its parameters (theta_m)."""

    def __init__(self, cfg, theta0):
        self.cfg = cfg
        self.model = TorchGpt(VOCAB, cfg.context, cfg.layers, cfg.channels, cfg.heads)
        self.flat = theta0.clone()
        offset = 0
        for name, shape in shapes(cfg):
            n = int(np.prod(shape))
            getattr(self.model, name).data = self.flat[offset:offset + n].view(shape)
            offset += n
        self.opt = torch.optim.AdamW(self.model.param_groups(0.1), lr=cfg.max_lr, betas=(0.9, 0.95),
                                     eps=1e-8, foreach=False)
        self.steps = 0

    def step(self, x, y):
        """One inner step on batch (x, y); returns the training loss."""
        lr = self.cfg.lr_at(self.steps)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        _, loss = self.model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.steps += 1
        return loss.item()


class Evaluator:
    """Validation loss of a flat parameter vector on longhaul-train's validation windows: the
    mean over val_batches batches of B windows of each batch's mean loss."""

    def __init__(self, cfg, data):
        self.cfg = cfg
        self.replica = Replica(cfg, torch.zeros(sum(int(np.prod(s)) for _, s in shapes(cfg))))
        self.batches = [corpus.val_batch(data.val, cfg.batch, cfg.context, i, cfg.val_batches)
                        for i in range(cfg.val_batches)]

    @torch.no_grad()
    def loss(self, theta):
        self.replica.flat.copy_(theta)
        total = 0.0
        for x, y in self.batches:
            total += self.replica.model(x, y)[1].item()
        return total / len(self.batches)
