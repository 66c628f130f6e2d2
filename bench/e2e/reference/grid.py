"""--grid: the regime that decides DiLoCo's gap to data-parallel, on the reference only (one
process): per-peer batch {4, 16} x H {10, 50} x outer lr {0.4, 0.7, 1.0} at the same 2,457,600
tokens (4 peers x 128 bytes per sequence), plus data-parallel per batch. Every cell keeps
longhaul-train's schedule shape: warmup over the first sixth of its steps, lr 3e-3 cosine to
3e-4, AdamW as in the protocol; Nesterov outer momentum 0.9.

Writes grid.json (rewritten after every cell, so a stopped run keeps what it has) and
grid_heatmap.png (DiLoCo's final validation loss over data-parallel's, per batch) into the
results directory, and returns the result object.
"""
import json
import os
import time

from . import corpus, model, run

TOKENS = 2_457_600
BATCHES = [4, 16]
HS = [10, 50]
OUTER_LRS = [0.4, 0.7, 1.0]
CONTEXT = 128


def cell_config(batch, seed, threads):
    steps = TOKENS // (run.PEERS * batch * CONTEXT)
    return model.Config(batch=batch, steps=steps, warmup=steps // 6, seed=seed, threads=threads)


def run_grid(results_dir, seed=1, threads=1, log=print):
    data = corpus.Corpus()
    out = {"bench": "diloco-grid", "tokens": TOKENS, "peers": run.PEERS, "seed": seed,
           "threads": threads, "unigram_entropy": round(data.unigram, 5), "dp": {}, "cells": []}
    path = os.path.join(results_dir, "grid.json")
    t0 = time.monotonic()

    def save():
        out["wall_s"] = round(time.monotonic() - t0, 1)
        with open(path, "w") as f:
            json.dump(out, f, indent=1)

    for b in BATCHES:
        cfg = cell_config(b, seed, threads)
        r = run.run("dp", cfg, data, val_every=max(1, cfg.steps // 6))
        out["dp"][str(b)] = r
        log(f"grid: dp batch {b} ({cfg.steps} steps): {r['val_loss']:.4f} [{r['wall_s']} s]")
        save()
        for H in HS:
            for lr in OUTER_LRS:
                r = run.run("diloco_h50_f32", cfg, data, H=H, outer_lr=lr, val_every=max(1, cfg.steps // 6))
                r.update(H=H, outer_lr=lr, rounds=cfg.steps // H,
                         loss_vs_dp=round(r["val_loss"] / out["dp"][str(b)]["val_loss"], 4))
                out["cells"].append(r)
                log(f"grid: batch {b} H {H} outer lr {lr}: {r['val_loss']:.4f} = "
                    f"{r['loss_vs_dp']:.4f} x dp [{r['wall_s']} s]")
                save()
    best = min(out["cells"], key=lambda c: c["loss_vs_dp"])
    out["best"] = {k: best[k] for k in ("batch", "H", "outer_lr", "val_loss", "loss_vs_dp")}
    save()
    heatmap(out, os.path.join(results_dir, "grid_heatmap.png"))
    return out


def heatmap(out, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(BATCHES), figsize=(5 * len(BATCHES), 3.6), dpi=100)
    for ax, b in zip(axes, BATCHES):
        cells = {(c["H"], c["outer_lr"]): c for c in out["cells"] if c["batch"] == b}
        grid = [[cells[(H, lr)]["loss_vs_dp"] if (H, lr) in cells else float("nan") for lr in OUTER_LRS]
                for H in HS]
        im = ax.imshow(grid, cmap="viridis_r", vmin=1.0, vmax=max(1.01, max(max(r) for r in grid)))
        for i, H in enumerate(HS):
            for j, lr in enumerate(OUTER_LRS):
                c = cells.get((H, lr))
                if c:
                    ax.text(j, i, f"{c['loss_vs_dp']:.3f}\n({c['val_loss']:.3f})", ha="center",
                            va="center", color="white", fontsize=9)
        dp = out["dp"].get(str(b), {}).get("val_loss")
        ax.set_title(f"batch {b}/peer, {TOKENS // (run.PEERS * b * CONTEXT)} steps; DP {dp:.3f}", fontsize=10)
        ax.set_xticks(range(len(OUTER_LRS)), [str(x) for x in OUTER_LRS])
        ax.set_yticks(range(len(HS)), [f"H={h}" for h in HS])
        ax.set_xlabel("outer lr (Nesterov, momentum 0.9)")
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.suptitle(f"DiLoCo final validation loss / data-parallel's (raw loss in brackets), "
                 f"{out['peers']} peers, {TOKENS:,} tokens, seed {out['seed']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
