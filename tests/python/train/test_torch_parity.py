#!/usr/bin/env python3
"""Parity of the C++ trainer with PyTorch (CPU, float32).

Runs train_parity_dump (initial weights, batches, logits, loss, gradients, parameters after a few
AdamW steps), rebuilds the same model in PyTorch from those weights and compares. Exits non-zero
on any mismatch beyond the tolerances below (the reasons for each are in the comments).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import TorchGpt, read_tensors  # noqa: E402

# Both sides are float32 with different summation orders (OpenBLAS vs PyTorch's GEMMs, our
# vectorised exp vs libm): differences are a few float32 ulps of the values involved.
LOGITS_ATOL = 1e-5       # logits are O(0.1-1) at init
LOSS_RTOL = 1e-6         # the mean of 512 per-position losses
GRAD_REL = 1e-5          # max |ours - torch| / max |torch| per gradient tensor
# One clip + AdamW step from the same parameters and the same (our) gradients: only the
# optimizer arithmetic differs, which mirrors torch.optim.AdamW's. The clip coefficient comes from
# each side's own global-norm reduction (they differ by ~1.5e-6 relative, and torch's varies from
# run to run with its thread scheduling), and Adam's first step normalises tiny gradients to
# about +-lr, so the bound is 1e-6: a thousandth of the step size, far below any real bug.
OPT_STEP_ATOL = 1e-6
# Parameters after several full steps (lr 1e-3, so each moves an element by up to ~1e-3). Adam's
# update m / (sqrt(v) + eps) amplifies the ~1e-6 relative gradient differences where gradients
# are tiny or change sign between steps, so: 99.9% of elements within 1e-6, all within 5e-5.
# The largest difference depends on which kernels run on both sides (OpenBLAS's kernel set, which
# follows our ISA build unless OPENBLAS_CORETYPE is set, and PyTorch's own; our own kernels gave
# the same result on every ISA build): measured on 2026-11-29 over 8 runs of each ISA build,
# Prescott 4.5e-6, Haswell 1.43e-5, SkylakeX 7.4e-6 (every run of one build the same), and
# 2.01e-5 on an AVX2 CPU without AVX-512 (issue 43); the fraction within 1e-6 was never below
# 99.988%. 5e-5 is 2.5x the largest seen and 2% of the total movement (2.5e-3): a real bug moves
# far more (docs/trainer.md).
PARAM_ATOL_MOST = 1e-6
PARAM_MOST_FRACTION = 0.999
PARAM_ATOL_ALL = 5e-5
# The key bias (qkv_b[:, C:2C]) has an exactly zero true gradient (softmax is unchanged by adding
# the same q.b to every score of a row), so both sides' "gradients" there are float noise that
# Adam turns into updates of either sign: it is held to PARAM_ATOL_ALL only.
SCALAR_RTOL = 1e-5       # per-step loss and global grad norm
SKIPPED = 77             # train_parity_dump's (and ctest's) code for an ISA this CPU cannot run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True, help="path to train_parity_dump")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--isa", choices=["scalar", "avx2", "avx512"],
                    help="run the trainer's kernels of this ISA build (LONGHAUL_FORCE_ISA); exits "
                         "77 (skipped) where this CPU cannot run it (train_parity_dump says so)")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.isa:
        env["LONGHAUL_FORCE_ISA"] = args.isa
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)

    failures = []

    def check(name, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if not ok:
            failures.append(name)

    with tempfile.TemporaryDirectory() as tmp:
        dump = subprocess.run([args.binary, tmp, str(args.steps)], env=env)
        if dump.returncode == SKIPPED and args.isa:
            return SKIPPED
        dump.check_returncode()
        with open(os.path.join(tmp, "config.json")) as f:
            cfg = json.load(f)
        init = read_tensors(os.path.join(tmp, "init"))
        step0 = read_tensors(os.path.join(tmp, "step0"))
        final = read_tensors(os.path.join(tmp, "final"))

    model = TorchGpt(cfg["vocab"], cfg["context"], cfg["layers"], cfg["channels"], cfg["heads"])
    names = [n for n, _ in model.named_parameters()]
    with torch.no_grad():
        for n in names:
            getattr(model, n).copy_(torch.from_numpy(init[n].copy()))
    batches = [(torch.from_numpy(init[f"inputs{s}"].astype(np.int64)),
                torch.from_numpy(init[f"targets{s}"].astype(np.int64))) for s in range(cfg["steps"])]

    # Forward and backward on batch 0.
    logits, loss = model(*batches[0])
    loss.backward()
    d = np.abs(logits.detach().numpy() - step0["logits"]).max()
    check("logits", d <= LOGITS_ATOL, f"max abs diff {d:.3g} (tol {LOGITS_ATOL})")
    ours = float(step0["loss"][0])
    d = abs(ours - loss.item()) / abs(loss.item())
    check("loss", d <= LOSS_RTOL, f"ours {ours:.7f} torch {loss.item():.7f} rel {d:.3g} (tol {LOSS_RTOL})")
    for n in names:
        ref = getattr(model, n).grad.numpy()
        scale = np.abs(ref).max()
        d = np.abs(step0["grad." + n] - ref).max() / scale
        check(f"grad {n}", d <= GRAD_REL, f"max |diff|/max|grad| {d:.3g} (max|grad| {scale:.3g}, tol {GRAD_REL})")

    # The optimizer alone: our step-0 gradients, PyTorch's clip + AdamW, our parameters after 1.
    opt = torch.optim.AdamW(model.param_groups(cfg["weight_decay"]), lr=float(final["step_lr"][0]),
                            betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"], foreach=False)
    with torch.no_grad():
        for n in names:
            getattr(model, n).copy_(torch.from_numpy(init[n].copy()))
            getattr(model, n).grad = torch.from_numpy(step0["grad." + n].copy())
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
    opt.step()
    for n in names:
        d = np.abs(final["after1." + n] - getattr(model, n).detach().numpy()).max()
        check(f"adamw step {n}", d <= OPT_STEP_ATOL, f"max abs diff {d:.3g} (tol {OPT_STEP_ATOL})")

    # The same steps in PyTorch: clip to the global norm, AdamW with the lr our schedule used.
    with torch.no_grad():
        for n in names:
            getattr(model, n).copy_(torch.from_numpy(init[n].copy()))
    opt = torch.optim.AdamW(model.param_groups(cfg["weight_decay"]), lr=1.0,
                            betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"], foreach=False)
    for s, (x, y) in enumerate(batches):
        lr = float(final["step_lr"][s])
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"]).item()
        opt.step()
        ours = float(final["step_loss"][s])
        d = abs(ours - loss.item()) / loss.item()
        check(f"step {s} loss", d <= SCALAR_RTOL, f"ours {ours:.7f} torch {loss.item():.7f} rel {d:.3g}")
        ours = float(final["step_grad_norm"][s])
        d = abs(ours - norm) / norm
        check(f"step {s} grad norm", d <= SCALAR_RTOL, f"ours {ours:.6g} torch {norm:.6g} rel {d:.3g}")
    for n in names:
        diff = np.abs(final[n] - getattr(model, n).detach().numpy())
        strict = np.ones(diff.shape, dtype=bool)
        if n == "qkv_b":
            C = cfg["channels"]
            strict[:, C:2 * C] = False
        within = float((diff[strict] <= PARAM_ATOL_MOST).mean())
        moved = np.abs(final[n] - init[n]).max()
        check(f"param {n} after {cfg['steps']} steps",
              within >= PARAM_MOST_FRACTION and diff.max() <= PARAM_ATOL_ALL,
              f"{100 * within:.3f}% within {PARAM_ATOL_MOST} (need {100 * PARAM_MOST_FRACTION}%), "
              f"max {diff.max():.3g} (tol {PARAM_ATOL_ALL}); moved up to {moved:.3g}")

    print(f"{len(failures)} failed" if failures else "all parity checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
