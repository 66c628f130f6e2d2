#!/usr/bin/env python3
"""A scalar model of the sync engine's outer loops, to see which outer step sizes a one-round delay
tolerates (docs/training.md, "Eager updates"). Not a benchmark: arithmetic on one number.

Model: the optimum is 0; a round of local training from x ends at (1 - eta) * x, so the
pseudo-gradient is eta * x. eta near 1 means a round's local training gets most of the way.
Each method runs 400 rounds from x = 1 for eta in (0, 1]; the table prints the largest |x| left
(below 1: converges for every eta; huge: diverges for some eta).
"""
import argparse


def nesterov(x, buffer, g, lr, mu, first):
    buffer = g if first else mu * buffer + g
    return x - lr * (g + mu * buffer), buffer


def diloco(eta, lr, mu, peers, rounds):
    x, b = 1.0, 0.0
    for k in range(rounds):
        x, b = nesterov(x, b, eta * x, lr, mu, k == 0)
    return x


def delayed(eta, lr, mu, peers, rounds):
    """Nesterov on the mean of the round before (the naive overlap)."""
    x, b, pending = 1.0, 0.0, None
    for k in range(rounds):
        fresh = eta * x
        if pending is not None:
            x, b = nesterov(x, b, pending, lr, mu, k == 1)
        pending = fresh
    return x


def eager_first_order(eta, lr, mu, peers, rounds):
    """The engine's rule before 2026-11-26: restart from x_g - lr (1 + mu) (fresh - previous) / N,
    the fresh pseudo-gradient measured against the shared x_g."""
    xg, b, start, previous, pending = 1.0, 0.0, 1.0, 0.0, None
    for k in range(rounds):
        fresh = xg - (1 - eta) * start
        if pending is not None:
            xg, b = nesterov(xg, b, pending, lr, mu, k == 1)
        start = xg - lr * (1 + mu) * (fresh - previous) / peers
        pending, previous = fresh, fresh
    return start


def eager_own_copy(eta, lr, mu, peers, rounds):
    """The paper's eager (every peer alike, so one outer copy): Nesterov on
    mean(k-1) + (fresh(k) - fresh(k-1)) / N."""
    x, b, pending, previous = 1.0, 0.0, 0.0, 0.0
    for k in range(rounds):
        fresh = eta * x
        x, b = nesterov(x, b, pending + (fresh - previous) / peers, lr, mu, k == 0)
        pending, previous = fresh, fresh
    return x


def eager_own_estimate(eta, lr, mu, peers, rounds):
    """The engine's eager since 2026-11-29: each peer restarts from a tentative Nesterov step of
    the shared state with its own fresh pseudo-gradient; the shared state takes the mean one round
    late. With every peer alike the estimate is the mean, so the restart point is DiLoCo's x."""
    x, b, start = 1.0, 0.0, 1.0
    for k in range(rounds):
        fresh = eta * start  # this round's progress from where it started
        b_tentative = fresh if k == 0 else mu * b + fresh
        start = x - lr * (fresh + mu * b_tentative)
        x, b = nesterov(x, b, fresh, lr, mu, k == 0)  # the mean, one round later
    return start


def co2(eta, lr, mu, peers, rounds, gap_penalty=1.0):
    x, m, pending = 1.0, 0.0, None
    for _ in range(rounds):
        fresh = eta * x
        if pending is not None:
            m = mu * m + pending / gap_penalty
            x = x - lr * m
        pending = fresh
    return x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=400)
    args = ap.parse_args()
    etas = [i / 20 for i in range(1, 21)]
    rows = [("DiLoCo (no delay)", diloco, 0.7, 0.9), ("delayed mean", delayed, 0.7, 0.9)]
    for lr in (0.7, 0.35):
        rows += [("eager, first-order restart", eager_first_order, lr, 0.9),
                 ("eager, own outer copy", eager_own_copy, lr, 0.9)]
    rows += [("eager, own estimate (engine)", eager_own_estimate, 0.7, 0.9)]
    rows += [("CO2 (lambda 1)", co2, 1.0, 0.2)]
    print(f"{'method':32} {'lr':>5} {'mu':>4}  largest |x| after {args.rounds} rounds, eta in (0, 1]")
    for name, f, lr, mu in rows:
        worst = max(abs(f(eta, lr, mu, args.peers, args.rounds)) for eta in etas)
        print(f"{name:32} {lr:5.2f} {mu:4.1f}  {worst:.2e}")
    worst = max(abs(co2(eta, 1.0, 0.2, args.peers, args.rounds, 2.0)) for eta in etas)
    print(f"{'CO2 (lambda 2)':32} {1.0:5.2f} {0.2:4.1f}  {worst:.2e}")


if __name__ == "__main__":
    main()
