#!/usr/bin/env python3
"""End-to-end checks of longhaul-train on a small generated corpus and a small model:

1. a run writes log.csv (one row per step, validation rows where asked), loss.png (a PNG) and
   checkpoint.bin, and its validation loss falls below the corpus's unigram entropy;
2. a run stopped half way (--stop-at) and resumed from its checkpoint ends with a checkpoint
   byte-identical to the uninterrupted run's (parameters, AdamW moments, step, data position);
3. bad flags are refused with exit status 2 (the round deadline's among them).
Exits non-zero on any failure.
"""
import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile

SMALL = ["--layers", "2", "--channels", "32", "--heads", "2", "--context", "32", "--batch", "8",
         "--lr", "5e-3", "--warmup", "5", "--val-batches", "4", "--threads", "2"]


def make_corpus(path):
    """Sentences from a small grammar: structure a model can learn quickly, not a unigram soup."""
    rng = random.Random(7)
    subjects = ["the cat", "a dog", "my friend", "the old man", "every child"]
    verbs = ["sees", "likes", "follows", "paints", "remembers"]
    objects = ["the river", "a red ball", "the quiet house", "some bread", "the moon"]
    with open(path, "w") as f:
        for _ in range(6000):
            f.write(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}.\n")


def run(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True, help="path to longhaul-train")
    args = ap.parse_args()
    failures = []

    def check(name, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
        if not ok:
            failures.append(name)

    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        make_corpus(corpus)

        out = os.path.join(tmp, "full")
        rc, stdout, stderr = run(args.binary, "--data", corpus, *SMALL, "--steps", "60",
                                 "--val-every", "20", "--out", out, "--json")
        check("run exits 0", rc == 0, stderr[-2000:] if rc else "")
        if rc == 0:
            summary = json.loads(stdout.strip().splitlines()[-1])
            with open(os.path.join(out, "log.csv")) as f:
                rows = list(csv.DictReader(f))
            check("log.csv has one row per step", [int(r["step"]) for r in rows] == list(range(1, 61)))
            val = [float(r["val_loss"]) for r in rows if r["val_loss"]]
            check("validation every 20 steps", len(val) == 3, str(val))
            check("validation loss falls", val[-1] < val[0], str(val))
            check("validation loss below the unigram entropy",
                  summary["final_val_loss"] < summary["unigram_entropy"] - 0.3,
                  f"val {summary['final_val_loss']:.3f} unigram {summary['unigram_entropy']:.3f}")
            with open(os.path.join(out, "loss.png"), "rb") as f:
                check("loss.png is a PNG", f.read(8) == b"\x89PNG\r\n\x1a\n")
            check("progress shows tokens/s and ETA", "tok/s" in stderr and "ETA" in stderr)

        # Interrupted at step 20 of 40, then resumed, versus straight through.
        straight, halves = os.path.join(tmp, "straight"), os.path.join(tmp, "halves")
        common = ["--data", corpus, *SMALL, "--steps", "40", "--val-every", "15", "--no-plot"]
        rc1, _, e1 = run(args.binary, *common, "--out", straight)
        rc2, _, e2 = run(args.binary, *common, "--out", halves, "--stop-at", "20")
        ckpt = os.path.join(halves, "checkpoint.bin")
        rc3, _, e3 = run(args.binary, *common, "--out", halves, "--resume", ckpt)
        ok = rc1 == rc2 == rc3 == 0
        check("straight, stopped and resumed runs exit 0", ok, "" if ok else (e1 + e2 + e3)[-2000:])
        if rc1 == rc2 == rc3 == 0:
            with open(os.path.join(straight, "checkpoint.bin"), "rb") as f:
                a = f.read()
            with open(ckpt, "rb") as f:
                b = f.read()
            check("resumed checkpoint is byte-identical to the uninterrupted one", a == b,
                  f"({len(a)} bytes)")
            with open(os.path.join(halves, "log.csv")) as f:
                steps = [int(r["step"]) for r in csv.DictReader(f)]
            check("resumed run appends to log.csv", steps == list(range(1, 41)))

        rc, _, err = run(args.binary, "--layers", "x")
        check("bad flag value refused with status 2", rc == 2 and "--layers" in err, err.strip())
        rc, _, err = run(args.binary, "--channels", "10", "--heads", "3", "--data", corpus)
        check("bad model shape refused with status 2", rc == 2, err.strip())
        rc, out, _ = run(args.binary, "--help")
        check("--help lists the round deadline's flags",
              rc == 0 and "--deadline-ms" in out and "--adaptive-deadline" in out)
        rc, _, err = run(args.binary, "--data", corpus, "--master", "127.0.0.1:1",
                         "--adaptive-deadline")
        check("--adaptive-deadline without --deadline-ms refused with status 2",
              rc == 2 and "--deadline-ms > 0" in err, err.strip())
        rc, _, err = run(args.binary, "--data", corpus, "--deadline-ms", "5000")
        check("--deadline-ms without --master refused with status 2",
              rc == 2 and "needs --master" in err, err.strip())

    print(f"{len(failures)} failed" if failures else "all CLI checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
