"""The byte-level GPT of src/train rebuilt in PyTorch, parameter for parameter.

Parameters carry the same names and shapes as the C++ flat layout (src/train/param_layout.cpp):
per-layer tensors are stacked along a leading L axis. Used by the parity test and as the
reference in `bench/run train`.
"""
import json
import math

import numpy as np
import torch
import torch.nn.functional as F

PARAM_SHAPES = [  # name, shape as a function of (V, T, L, C)
    ("wte", lambda V, T, L, C: (V, C)),
    ("wpe", lambda V, T, L, C: (T, C)),
    ("ln1_w", lambda V, T, L, C: (L, C)),
    ("ln1_b", lambda V, T, L, C: (L, C)),
    ("qkv_w", lambda V, T, L, C: (L, 3 * C, C)),
    ("qkv_b", lambda V, T, L, C: (L, 3 * C)),
    ("attproj_w", lambda V, T, L, C: (L, C, C)),
    ("attproj_b", lambda V, T, L, C: (L, C)),
    ("ln2_w", lambda V, T, L, C: (L, C)),
    ("ln2_b", lambda V, T, L, C: (L, C)),
    ("fc_w", lambda V, T, L, C: (L, 4 * C, C)),
    ("fc_b", lambda V, T, L, C: (L, 4 * C)),
    ("fcproj_w", lambda V, T, L, C: (L, C, 4 * C)),
    ("fcproj_b", lambda V, T, L, C: (L, C)),
    ("lnf_w", lambda V, T, L, C: (C,)),
    ("lnf_b", lambda V, T, L, C: (C,)),
]
DECAY = {"wte", "wpe", "qkv_w", "attproj_w", "fc_w", "fcproj_w"}


class TorchGpt(torch.nn.Module):
    def __init__(self, vocab, context, layers, channels, heads):
        super().__init__()
        self.V, self.T, self.L, self.C, self.NH = vocab, context, layers, channels, heads
        for name, shape in PARAM_SHAPES:
            self.register_parameter(
                name, torch.nn.Parameter(torch.zeros(shape(vocab, context, layers, channels))))

    def init_like_cpp(self, seed=0):
        """Not the C++ generator's values, the same distributions (for the benchmark only)."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, _ in PARAM_SHAPES:
                p = getattr(self, name)
                if name in DECAY:
                    std = 0.02 / math.sqrt(2 * self.L) if name in ("attproj_w", "fcproj_w") else 0.02
                    p.normal_(0.0, std, generator=g)
                elif name.endswith("_w"):
                    p.fill_(1.0)
                else:
                    p.zero_()

    def forward(self, idx, targets=None):
        B, T = idx.shape
        C, NH = self.C, self.NH
        x = self.wte[idx] + self.wpe[:T]
        for l in range(self.L):
            h = F.layer_norm(x, (C,), self.ln1_w[l], self.ln1_b[l], 1e-5)
            qkv = F.linear(h, self.qkv_w[l], self.qkv_b[l])
            q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in qkv.split(C, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(y, self.attproj_w[l], self.attproj_b[l])
            h = F.layer_norm(x, (C,), self.ln2_w[l], self.ln2_b[l], 1e-5)
            h = F.gelu(F.linear(h, self.fc_w[l], self.fc_b[l]), approximate="tanh")
            x = x + F.linear(h, self.fcproj_w[l], self.fcproj_b[l])
        x = F.layer_norm(x, (C,), self.lnf_w, self.lnf_b, 1e-5)
        logits = F.linear(x, self.wte)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, self.V), targets.reshape(-1))

    def param_groups(self, weight_decay):
        decay = [getattr(self, n) for n, _ in PARAM_SHAPES if n in DECAY]
        rest = [getattr(self, n) for n, _ in PARAM_SHAPES if n not in DECAY]
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": rest, "weight_decay": 0.0}]


def read_tensors(prefix):
    """Reads PREFIX.json + PREFIX.bin written by src/train/tensor_file.cpp: {name: np.ndarray}."""
    with open(prefix + ".json") as f:
        meta = json.load(f)["tensors"]
    flat = np.fromfile(prefix + ".bin", dtype="<f4")
    out = {}
    for t in meta:
        size = int(np.prod(t["shape"]))
        out[t["name"]] = flat[t["offset"]:t["offset"] + size].reshape(t["shape"])
    expected = sum(int(np.prod(t["shape"])) for t in meta)
    if expected != flat.size:
        raise ValueError(f"{prefix}.bin holds {flat.size} floats, the table {expected}")
    return out
