#!/usr/bin/env python3
"""The default model trained on the default corpus (Python's standard library) for 300 steps
must reach a validation loss at least MARGIN nats/byte below the corpus's unigram entropy (the
best a model ignoring context can do). Labelled `long` in ctest: it takes minutes."""
import argparse
import json
import subprocess
import sys
import tempfile

MARGIN = 0.8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([args.binary, "--steps", str(args.steps), "--out", tmp, "--json"],
                           capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr[-3000:])
        return 1
    s = json.loads(p.stdout.strip().splitlines()[-1])
    ok = s["final_val_loss"] < s["unigram_entropy"] - MARGIN
    print(f"{'ok' if ok else 'FAIL'}: validation loss {s['final_val_loss']:.4f} after {s['steps']} "
          f"steps, unigram entropy {s['unigram_entropy']:.4f} (need {MARGIN} below), "
          f"{s['tokens_per_s']:.0f} tokens/s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
