"""longhaul-train's data, rebuilt from its documented rules (docs/trainer.md, "Data"): the corpus
is every *.py file under the given directories (installed packages left out), sorted by path;
every 10th file (the 10th, 20th, ...) is held out for validation; peer i of N trains on the i-th
contiguous N-th of the training bytes. Training batch `index` (the peer's step count, from 0)
draws B window offsets with SplitMix64 seeded by mix_seed(data_seed, index); validation takes
B x count windows evenly spaced over the held-out split.
"""
import math
import os
import sys

import numpy as np
import torch

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + GOLDEN) & MASK
        return _mix(self.state)

    def below(self, n):
        return self.next() % n


def mix_seed(a, b):
    r = SplitMix64(a ^ ((b * 0xD1B54A32D192ED03) & MASK))
    r.next()
    return r.next()


def normals(seed, n):
    """n standard normals as longhaul-train's Rng(seed).normal() gives them: Box-Muller on two
    53-bit uniforms in (0, 1] per value, in double (libm's log and cos, through Python's math)."""
    k = np.arange(1, 2 * n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed & MASK) + k * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = ((z >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0 ** -53
    u1, u2 = u[0::2].tolist(), u[1::2].tolist()
    two_pi = 6.283185307179586
    return np.fromiter((math.sqrt(-2.0 * math.log(a)) * math.cos(two_pi * b) for a, b in zip(u1, u2)),
                       dtype=np.float64, count=n)


def default_data_dir():
    import sysconfig
    return sysconfig.get_paths()["stdlib"]


def python_files(root):
    found = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        parts = [] if rel == "." else rel.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            dirs[:] = []
            continue
        for f in files:
            p = os.path.join(d, f)
            if f.endswith(".py") and os.path.isfile(p):
                found.append(p)
    return sorted(found, key=os.fsencode)  # byte order, as the trainer's std::sort


class Corpus:
    def __init__(self, root=None):
        files = python_files(root or default_data_dir())
        if not files:
            raise SystemExit(f"reference: no *.py files under {root}")
        train, val = [], []
        for i, path in enumerate(files):
            with open(path, "rb") as f:
                (val if i % 10 == 9 else train).append(f.read())
        self.files = len(files)
        self.train = np.frombuffer(b"".join(train), dtype=np.uint8)
        self.val = np.frombuffer(b"".join(val), dtype=np.uint8)
        self.unigram = unigram_cross_entropy(self.train, self.val)

    def shard(self, shards, index):
        n = self.train.size
        return self.train[index * n // shards:(index + 1) * n // shards]


def unigram_cross_entropy(reference, text):
    counts = np.bincount(reference, minlength=256).astype(np.float64)
    seen = np.bincount(text, minlength=256).astype(np.float64)
    total = reference.size + 256.0
    nats = -sum(seen[b] * math.log((counts[b] + 1.0) / total) for b in range(256) if seen[b] > 0)
    return nats / text.size


def _windows(split, offsets, T):
    idx = np.asarray(offsets, dtype=np.int64)[:, None] + np.arange(T + 1, dtype=np.int64)[None, :]
    w = torch.from_numpy(split[idx].astype(np.int64))
    return w[:, :-1], w[:, 1:]


def train_batch(split, B, T, data_seed, index):
    rng = SplitMix64(mix_seed(data_seed, index))
    windows = split.size - T
    return _windows(split, [rng.below(windows) for _ in range(B)], T)


def val_batch(split, B, T, index, count):
    last = split.size - T - 1
    windows = B * count
    offsets = [(index * B + b) * last // (windows - 1) if windows > 1 else 0 for b in range(B)]
    return _windows(split, offsets, T)


if __name__ == "__main__":
    c = Corpus(sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"{c.files} files, train {c.train.size:,} bytes, val {c.val.size:,} bytes, "
          f"unigram {c.unigram:.5f}")
