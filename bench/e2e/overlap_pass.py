"""The overlap issue's figures in bench/run diloco-wan (docs/overlap.md, "Measured"):
nonblocked_<rate> = 1 - the blocked fraction of the best method on the shaped link, where a
method counts only if its loss on loopback is within 2% of DiLoCo-f32 at the same H.

- Methods with an adaptive delay (ADAPTIVE) choose tau themselves in the pass. Their blocked
  fraction is taken from the steps after the first two cycles (the first runs at the configured
  tau = 1; its measurements decide the second's), from every peer's timeline.csv. Their loss is
  then measured on loopback with tau fixed at the largest value the pass chose (the most stale
  the pass ever was), the whole protocol, seed 1.
- The other methods' loss comes from the loss results (bench/run diloco, seed 1): Streaming at
  tau = 1 and CO2 against DiLoCo-f32 H = 50, DiLoCo-u8 H = 100 against DiLoCo-f32 H = 100.

Candidates are tried from the least blocked down, and the first that qualifies is the best, so
only the loopback runs that can decide the answer are made. Imported by bench/e2e/diloco-wan.
"""
import csv
import os
import statistics

from diloco_runs import METHODS, h_of, log

ADAPTIVE = ["streaming_adaptive", "streaming_u8_adaptive"]
LOSS_BOUND = 1.02  # the loss a method may add over DiLoCo-f32 at the same H to qualify
ADAPT_CYCLES = 4  # an adaptive pass lasts at least this many cycles of H steps
SETTLE_CYCLES = 2  # ... and its blocked fraction counts from this cycle on
# The DiLoCo-f32 each method's loss is compared with (the same H).
BASELINE = {"diloco_h100_u8": "diloco_h100_f32", "streaming": "diloco_h50_f32", "co2": "diloco_h50_f32",
            "streaming_adaptive": "diloco_h50_f32", "streaming_u8_adaptive": "diloco_h50_f32",
            "diloco_h50_sparse": "diloco_h50_f32"}


def configured_tau(key, p):
    """The delay a non-adaptive method runs at: DiLoCo 0, Streaming its --delay, CO2 H."""
    flags = METHODS[key][0]
    if "--delay" in flags:
        return int(flags[flags.index("--delay") + 1])
    return h_of(p, key) if flags[1] == "co2" else 0


def _timeline(out_dir):
    with open(os.path.join(out_dir, "timeline.csv")) as f:
        return list(csv.DictReader(f))


def adaptive_figures(out_dirs, h):
    """tau as the pass chose it, and the blocked fraction after SETTLE_CYCLES cycles (mean over
    peers, the last step left out: it settles the round in flight and validates)."""
    timelines = [_timeline(d) for d in out_dirs]  # tau is the group's: peer 0's says it
    taus = [int(r["tau"]) for r in timelines[0] if r["tau"]]
    settled = [int(r["tau"]) for r in timelines[0] if r["tau"] and int(r["step"]) > SETTLE_CYCLES * h]
    fracs, blocked, step_s = [], [], []
    for rows in timelines:
        rows = [r for r in rows if int(r["step"]) > SETTLE_CYCLES * h][:-1]
        b = sum(float(r["blocked_s"]) for r in rows)
        c = sum(float(r["compute_s"]) for r in rows)
        fracs.append(b / (b + c) if b + c > 0 else None)
        blocked.append(b)
        step_s.append(b + c)
    ok = [x for x in fracs if x is not None]
    return {"tau_per_step_counts": {str(t): taus.count(t) for t in sorted(set(taus))},
            "tau_settled_max": max(settled) if settled else None,
            "tau_last": taus[-1] if taus else None,
            "blocked_fraction_settled": round(statistics.mean(ok), 4) if ok else None,
            "blocked_fraction_settled_per_peer": [round(x, 4) if x is not None else None for x in fracs],
            "blocked_s_settled": round(statistics.mean(blocked), 3),
            "step_s_settled": round(statistics.mean(step_s), 3),
            "settled_from_step": SETTLE_CYCLES * h + 1}


def fixed_tau_key(key, tau):
    """Registers (once) the method `key` with its adaptive delay replaced by tau fixed."""
    fixed = f"{key}_tau{tau}"
    if fixed not in METHODS:
        flags, h = METHODS[key]
        out, i = [], 0
        while i < len(flags):
            if flags[i] == "--adaptive-delay":
                i += 1
            elif flags[i] in ("--max-staleness-steps", "--delay"):
                i += 2
            else:
                out.append(flags[i])
                i += 1
        METHODS[fixed] = (out + ["--delay", str(tau)], h)
    return fixed


class Qualifier:
    """The loopback losses candidates are judged by, each measured at most once."""

    def __init__(self, bench, loss_results):
        self.bench = bench
        self.loss = loss_results or {}
        self.runs = {}  # method key (tau fixed) -> loopback run figures

    def seed1_loss(self, key):
        """Seed 1's validation loss of `key`: from the loss results, else run here on loopback."""
        m = (self.loss.get("methods") or {}).get(key) or {}
        per_seed = m.get("val_loss_per_seed") or []
        if per_seed and per_seed[0] is not None and self._same_protocol():
            return per_seed[0], "loss results"
        return self._run(key)["val_loss"], "run here"

    def _same_protocol(self):
        proto = self.loss.get("protocol") or {}
        p = self.bench.p
        return all(proto.get(k) == p[k] for k in ("steps", "batch", "context", "model"))

    def _run(self, key):
        if key not in self.runs:
            from diloco_report import summarize_peers
            log(f"overlap: {key} on loopback (the whole protocol, seed 1) for its loss ...")
            try:
                peers, outs = self.bench.group(key, 1, self.bench.p["steps"])
                self.runs[key] = summarize_peers(peers, outs)
                log(f"  {key}: val loss {self.runs[key]['val_loss']}")
            except RuntimeError as e:
                log(f"  {key}: FAILED: {e}")
                self.runs[key] = {"val_loss": None, "error": str(e)[:1500]}
        return self.runs[key]

    def judge(self, key, tau):
        """{loss, baseline loss, their ratio, qualifies} of method `key` at `tau`."""
        if key in ADAPTIVE:
            loss, source = self._run(fixed_tau_key(key, tau))["val_loss"], "run here, tau fixed"
        else:
            loss, source = self.seed1_loss(key)
        base, base_source = self.seed1_loss(BASELINE[key])
        ratio = loss / base if loss is not None and base else None
        return {"loss": loss, "loss_source": source, "baseline": BASELINE[key], "baseline_loss": base,
                "baseline_source": base_source, "loss_vs_diloco_f32": round(ratio, 5) if ratio else None,
                "qualifies": ratio is not None and ratio <= LOSS_BOUND}


def candidates(lab, p):
    """[(1 - blocked, key, tau, cu terms)] of the rate's passes, least blocked first (not DP)."""
    from diloco_report import reference_tps
    out = []
    for key, r in lab.items():
        if key not in BASELINE or not isinstance(r, dict) or "error" in r:
            continue
        if key in ADAPTIVE:
            ov = r.get("overlap") or {}
            frac, tau = ov.get("blocked_fraction_settled"), ov.get("tau_settled_max")
        else:
            frac, tau = r.get("blocked_fraction"), configured_tau(key, p)
        if frac is None or tau is None:
            continue
        out.append((1 - frac, key, tau, (r["tokens_per_s_sum"], reference_tps(lab, key))))
    return sorted(out, key=lambda c: -c[0])


def fields(shaped, rates, qualifier, p):
    """nonblocked_<rate> with its method, tau, loss check and cu; and every candidate's figures."""
    out, tried = {}, {}
    for rate in rates:
        tried[rate] = []
        best = None
        for nonblocked, key, tau, (tps, ref) in candidates(shaped.get(rate) or {}, p):
            verdict = qualifier.judge(key, tau)
            tried[rate].append({"method": key, "tau": tau, "nonblocked": round(nonblocked, 4),
                                "cu": round(tps / ref, 4) if ref else None, **verdict})
            if verdict["qualifies"]:
                best = tried[rate][-1]
                break
        out[f"nonblocked_{rate}"] = best["nonblocked"] if best else None
        out[f"nonblocked_{rate}_method"] = best["method"] if best else None
        out[f"nonblocked_{rate}_tau"] = best["tau"] if best else None
        out[f"nonblocked_{rate}_loss_vs_diloco_f32"] = (
            [best["loss_vs_diloco_f32"], best["loss"], best["baseline_loss"]] if best else None)
        out[f"nonblocked_{rate}_cu"] = best["cu"] if best else None
        out[f"nonblocked_{rate}_met"] = best is not None and best["nonblocked"] >= 0.95
    out["nonblocked_target"] = ">= 0.95, loss within 2% of DiLoCo-f32 at the same H"
    out["nonblocked_candidates"] = tried
    out["nonblocked_loopback_runs"] = qualifier.runs
    return out


def print_summary(res, rates):
    for rate in rates:
        print(f"\nnonblocked at {rate}: {res.get(f'nonblocked_{rate}')} "
              f"({res.get(f'nonblocked_{rate}_method')}, tau {res.get(f'nonblocked_{rate}_tau')}; "
              f"cu {res.get(f'nonblocked_{rate}_cu')}; target >= 0.95)")
        print(f"  {'candidate':<24}{'tau':>5}{'1-blocked':>11}{'cu':>8}{'loss':>9}{'f32 same H':>12}"
              f"{'ratio':>9}  qualifies")
        for c in res.get("nonblocked_candidates", {}).get(rate, []):
            print(f"  {c['method']:<24}{c['tau']:>5}{c['nonblocked']:>11.4f}{c['cu'] or 0:>8.3f}"
                  f"{c['loss'] or 0:>9.4f}{c['baseline_loss'] or 0:>12.4f}{c['loss_vs_diloco_f32'] or 0:>9.4f}"
                  f"  {'yes' if c['qualifies'] else 'no'}")
