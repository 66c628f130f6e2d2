#!/usr/bin/env python3
"""Loss curve of a longhaul-train run: plot_loss.py LOG.csv OUT.png [--unigram NATS]

Reads the CSV longhaul-train writes (step, lr, train_loss, val_loss, ...) and draws training and
validation loss against the step, with the corpus's unigram entropy as a reference line.
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--unigram", type=float, help="unigram entropy (nats/byte) to draw as a line")
    args = ap.parse_args()
    steps, train, val_steps, val = [], [], [], []
    with open(args.csv) as f:
        for row in csv.DictReader(f):
            steps.append(int(row["step"]))
            train.append(float(row["train_loss"]))
            if row["val_loss"]:
                val_steps.append(int(row["step"]))
                val.append(float(row["val_loss"]))
    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    ax.plot(steps, train, lw=0.8, alpha=0.7, label="train loss")
    if val:
        ax.plot(val_steps, val, "o-", lw=1.5, ms=3, label="validation loss")
    if args.unigram is not None:
        ax.axhline(args.unigram, color="gray", ls="--", lw=1,
                   label=f"unigram entropy {args.unigram:.3f}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/byte)")
    ax.set_title("longhaul-train: byte-level GPT")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png)


if __name__ == "__main__":
    main()
