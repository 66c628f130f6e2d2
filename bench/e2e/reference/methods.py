"""The benchmark's methods over M simulated replicas, from docs/training.md:

- data-parallel: every step the replicas' gradients are averaged (every replica holds the same
  parameters, so this is one model on the M batches together: the mean of M equal-sized batch
  means is the mean over all of them);
- the sync engine's outer loops (`OuterLoop`): DiLoCo and Streaming DiLoCo (Nesterov outer SGD,
  fragments, delay tau, merge alpha), CO2 and eager (one-round-delayed). The outer loop only sees
  the replicas' flat parameter vectors, so the same loop also replays longhaul's own rounds
  (rounds.py).

"When each fragment syncs": fragment f launches round k >= 1 after inner step k*H + f*floor(H/F);
its outer update is applied tau steps later (tau = 0: at once); in a step, the rounds due are
applied first, then rounds launched. CO2 and eager (one fragment) apply round k - 1's average at
round k's launch. close() applies what is in flight (CO2 and eager: the shared update only).
"""
from dataclasses import dataclass

import numpy as np
import torch

from . import corpus, outer
from .model import Replica, shapes


@dataclass
class Spec:
    kind: str               # "diloco" (also Streaming), "co2", "eager"
    H: int
    fragments: int = 1
    tau: int = 0
    lr: float = 0.7         # outer lr (CO2: alpha_o)
    mu: float = 0.9         # outer momentum (CO2: beta)
    mix: float = 0.0        # merge alpha
    gap_penalty: float = 1.0
    clip: float = 0.0
    # eager's estimate of the round's mean: "own" (this peer's fresh pseudo-gradient, the engine's
    # rule) or "paper" (the others' delayed mean with its own share fresh: the engine's rule
    # until 2026-11-29, kept to measure the two side by side)
    estimate: str = "own"

    @property
    def delayed(self):
        return self.kind in ("co2", "eager")


def fragment_indices(cfg, F):
    """longhaul-train's fragment layout (docs/training.md): layer l of a per-layer tensor goes to
    fragment l mod F; every other tensor is cut into F blocks of rows [b*rows/F, (b+1)*rows/F)."""
    owner = []
    for name, shape in shapes(cfg):
        rows = shape[0]
        row = int(np.prod(shape)) // rows
        per_layer = name not in ("wte", "wpe", "lnf_w", "lnf_b")
        if per_layer:
            owner.append(np.repeat(np.arange(rows) % F, row))
        else:
            b = np.empty(rows, np.int64)
            for k in range(F):
                b[k * rows // F:(k + 1) * rows // F] = k
            owner.append(np.repeat(b, row))
    owner = np.concatenate(owner)
    return [torch.from_numpy(np.nonzero(owner == f)[0]) for f in range(F)]


class OuterLoop:
    """The shared outer state (theta_g and the outer momentum, bit-identical on every peer in the
    engine) and each replica's own state (eager), stepped with the replicas' flat vectors."""

    def __init__(self, spec, theta0, replicas, indices):
        self.s, self.M = spec, replicas
        self.theta_g = theta0.clone()
        self.buf = torch.zeros_like(theta0)
        self.idx = indices
        self.rounds = [0] * len(indices)
        self.in_flight = []  # (fragment, due step, [Δ_m])
        self.delayed_deltas = None  # CO2 / eager: round k - 1's contributions
        if spec.kind == "eager" and spec.estimate == "own":
            self.start = [theta0.clone() for _ in range(replicas)]  # where each round started
        elif spec.kind == "eager":
            self.prev = [torch.zeros_like(theta0) for _ in range(replicas)]
            self.dev = [torch.zeros_like(theta0) for _ in range(replicas)]
            self.own = [torch.zeros_like(theta0) for _ in range(replicas)]

    def launched(self, t, f):
        off = f * (self.s.H // self.s.fragments)
        return t >= self.s.H + off and (t - off) % self.s.H == 0

    def step(self, t, locals_):
        """The engine's step t (after every replica's inner step t); updates locals_ in place."""
        if self.s.delayed:
            if self.launched(t, 0):
                self._delayed_round(locals_, restart=True)
            return
        for f, due, deltas in [r for r in self.in_flight if r[1] == t]:
            self._apply(f, deltas, locals_)
        self.in_flight = [r for r in self.in_flight if r[1] != t]
        for f in range(len(self.idx)):
            if self.launched(t, f):
                deltas = [self.theta_g[self.idx[f]] - x[self.idx[f]] for x in locals_]
                if self.s.tau == 0:
                    self._apply(f, deltas, locals_)
                else:
                    self.in_flight.append((f, t + self.s.tau, deltas))

    def close(self, locals_):
        if self.s.delayed:
            if self.delayed_deltas is not None:
                self._delayed_round(locals_, restart=False)
            return
        for f, _, deltas in self.in_flight:
            self._apply(f, deltas, locals_)
        self.in_flight = []

    def _apply(self, f, deltas, locals_):
        i = self.idx[f]
        theta, buf = self.theta_g[i], self.buf[i]
        outer.nesterov(theta, buf, outer.mean_of(deltas), self.s.lr, self.s.mu, self.rounds[f] == 0)
        self.theta_g[i], self.buf[i] = theta, buf
        self.rounds[f] += 1
        a = torch.tensor(self.s.mix, dtype=torch.float32)
        for x in locals_:
            x[i] = theta if self.s.mix == 0.0 else (a * x[i]) + ((1 - a) * theta)

    def _eager_own_round(self, locals_, restart):
        """Eager (docs/training.md): the shared state is DiLoCo's, one round late; each peer
        restarts from a tentative Nesterov step of the shared state with its own Δ_m(k) standing
        in for the mean, kept as its deviation e = r − θ_g."""
        fresh = [self.start[m] - locals_[m] for m in range(len(locals_))]
        if self.delayed_deltas is not None:
            outer.nesterov(self.theta_g, self.buf, outer.mean_of(self.delayed_deltas), self.s.lr,
                           self.s.mu, self.rounds[0] == 0)
            self.rounds[0] += 1
        for m, x in enumerate(locals_):
            x.copy_(self.theta_g)
            if restart:
                r, buf = self.theta_g.clone(), self.buf.clone()
                outer.nesterov(r, buf, fresh[m], self.s.lr, self.s.mu, self.rounds[0] == 0)
                x.copy_(self.theta_g + (r - self.theta_g))  # e = r − θ_g; θ_local = θ_g + e
                self.start[m] = x.clone()
        self.delayed_deltas = fresh if restart else None

    def _delayed_round(self, locals_, restart):
        """CO2 / eager at a launch step: the delayed average into the shared state, this round's
        pseudo-gradients against where each replica's round started, and the restart."""
        eager = self.s.kind == "eager"
        if eager and self.s.estimate == "own":
            return self._eager_own_round(locals_, restart)
        starts = [self.theta_g + self.dev[m] if eager else self.theta_g.clone()
                  for m in range(len(locals_))]
        fresh = [starts[m] - locals_[m] for m in range(len(locals_))]
        if self.delayed_deltas is not None:
            g = outer.mean_of(self.delayed_deltas)
            if eager:
                outer.nesterov(self.theta_g, self.buf, g, self.s.lr, self.s.mu, self.rounds[0] == 0)
            else:
                outer.co2(self.theta_g, self.buf, g, self.s.lr, self.s.mu, self.s.gap_penalty, self.s.clip)
            self.rounds[0] += 1
        for m, x in enumerate(locals_):
            x.copy_(self.theta_g)
            if restart and eager:
                outer.eager_own(self.prev[m], self.dev[m], self.own[m], fresh[m],
                                float(np.float32(1.0) / np.float32(len(locals_))), self.s.lr, self.s.mu)
                x.copy_(self.theta_g + self.dev[m])
        self.delayed_deltas = fresh if restart else None


class Simulation:
    """M replicas from the same initial parameters, each on its contiguous shard."""

    def __init__(self, cfg, data, M, theta0):
        self.cfg, self.M = cfg, M
        self.replicas = [Replica(cfg, theta0) for _ in range(M)]
        self.shards = [data.shard(M, m) for m in range(M)]

    def inner_step(self, t):
        """Inner step t (from 1) of every replica on batch t - 1 of its shard; the mean loss."""
        losses = [r.step(*corpus.train_batch(self.shards[m], self.cfg.batch, self.cfg.context,
                                             self.cfg.data_seed, t - 1))
                  for m, r in enumerate(self.replicas)]
        return sum(losses) / len(losses)


def run_outer(cfg, data, M, spec, theta0, evaluate, val_every, log=None):
    """One engine method; returns (curve [(step, val loss of theta_g)], final theta_g)."""
    sim = Simulation(cfg, data, M, theta0)
    loop = OuterLoop(spec, theta0, M, fragment_indices(cfg, spec.fragments))
    locals_ = [r.flat for r in sim.replicas]
    curve = []
    for t in range(1, cfg.steps + 1):
        loss = sim.inner_step(t)
        loop.step(t, locals_)
        if t < cfg.steps and t % val_every == 0:
            curve.append((t, evaluate(loop.theta_g)))
            if log:
                log(f"  step {t}: train {loss:.4f}, val {curve[-1][1]:.4f}")
    loop.close(locals_)
    curve.append((cfg.steps, evaluate(loop.theta_g)))
    return curve, loop.theta_g


def run_dp(cfg, data, M, theta0, evaluate, val_every, log=None):
    """Data-parallel: one model on the M replicas' batches of each step together."""
    r = Replica(cfg, theta0)
    shards = [data.shard(M, m) for m in range(M)]
    curve = []
    for t in range(1, cfg.steps + 1):
        xs, ys = zip(*(corpus.train_batch(s, cfg.batch, cfg.context, cfg.data_seed, t - 1) for s in shards))
        loss = r.step(torch.cat(xs), torch.cat(ys))
        if t % val_every == 0 or t == cfg.steps:
            curve.append((t, evaluate(r.flat)))
            if log and t < cfg.steps:
                log(f"  step {t}: train {loss:.4f}, val {curve[-1][1]:.4f}")
    return curve, r.flat
