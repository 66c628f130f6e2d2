#!/usr/bin/env python3
"""The reference for `bench/run train`: PyTorch (CPU, float32) training the same byte-level GPT
with the same batch, context and thread count. Prints one JSON object on stdout.

The model is tests/python/train/torch_gpt.py (the one the parity test checks against ours);
one step is forward + backward + global-norm clipping + AdamW, as in longhaul-train.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "python", "train"))
from torch_gpt import TorchGpt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=5)
    ap.add_argument("--channels", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=20, help="measured steps")
    ap.add_argument("--warmup", type=int, default=3, help="unmeasured steps first")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = TorchGpt(256, args.context, args.layers, args.channels, args.heads)
    model.init_like_cpp(0)
    opt = torch.optim.AdamW(model.param_groups(0.1), lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, 256, (args.warmup + args.steps, args.batch, args.context + 1),
                         generator=g)

    def step(i):
        x, y = data[i, :, :-1], data[i, :, 1:]
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for i in range(args.warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(args.warmup, args.warmup + args.steps):
        step(i)
    seconds = time.perf_counter() - t0
    tokens = args.steps * args.batch * args.context
    print(json.dumps({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                      "steps": args.steps, "seconds": round(seconds, 4),
                      "torch_tokens_per_s": round(tokens / seconds, 1)}))


if __name__ == "__main__":
    main()
