"""The figures of bench/run diloco: per-method summaries, the issue's ratios with their targets,
the table and the loss curves. Imported by bench/e2e/diloco; no side effects on import."""
import csv
import os
import statistics

# The ratios of issue 20 (the JSON field names are a contract): name -> (how, target, comparison).
# "loss"/"bytes"/"peak": figure of method A / figure of method B.
DILOCO = "diloco_h50_f32"  # the DiLoCo that Streaming, CO2 and eager are compared with (same H)
RATIOS = {
    "diloco_h50_loss_vs_dp": (("val_loss", DILOCO, "dp"), 1.04, "<="),
    "bytes_dp_over_diloco_h100_u8": (("bytes_per_peer", "dp", "diloco_h100_u8"), 380, ">="),
    "bytes_dp_over_diloco_h100_4bit": (("bytes_per_peer", "dp", "diloco_h100_4bit"), 750, ">="),
    "streaming_peak_reduction": (("peak_event_bytes", DILOCO, "streaming"), 3.8, ">="),
    "streaming_loss_vs_diloco": (("val_loss", "streaming", DILOCO), 1.01, "<="),
    "co2_loss_vs_diloco": (("val_loss", "co2", DILOCO), 1.02, "<="),
    "eager_loss_vs_diloco": (("val_loss", "eager", DILOCO), 1.02, "<="),
    # The sparse codec's (issue 48): against DiLoCo-f32 at the same H, and data-parallel.
    "sparse_loss_vs_diloco": (("val_loss", "diloco_h50_sparse", DILOCO), 1.02, "<="),
    "sparse_bytes_vs_f32": (("bytes_per_peer", DILOCO, "diloco_h50_sparse"), 63, ">="),
    "bytes_dp_over_diloco_h50_sparse": (("bytes_per_peer", "dp", "diloco_h50_sparse"), 2500, ">="),
}
SPARSE = "diloco_h50_sparse"
CU_METHODS = ["diloco_h100_u8", "streaming", "co2"]  # cu_<rate> is the lowest of these
TARGETS = {**{k: (t, c) for k, (_, t, c) in RATIOS.items()},
           "co2_blocked_fraction": (0.02, "<="),
           "sparse_codec_ratio": (140, ">="),
           "cu_100mbit": (0.95, ">="), "cu_10mbit": (0.95, ">="),
           "dp_val_loss_vs_unigram": (0.7, "<=")}


def steady_blocked_fraction(out_dirs):
    """Time blocked in the engine / step time, between the first and the next-to-last rows of each
    peer's log.csv (mean over peers): the start collective (which waits for every peer to load
    the corpus) and the last step (which settles the round in flight and validates) left out."""
    fracs, blocked, steps_s = [], [], []
    for d in out_dirs:
        with open(os.path.join(d, "log.csv")) as f:
            rows = list(csv.DictReader(f))
        if len(rows) < 3 or not rows[0].get("blocked_s"):
            return None, None, None, None
        a, b = rows[0], rows[-2]
        dt = float(b["elapsed_s"]) - float(a["elapsed_s"])
        db = float(b["blocked_s"]) - float(a["blocked_s"])
        fracs.append(db / dt if dt > 0 else 0.0)
        blocked.append(db)
        steps_s.append(dt)
    return (round(statistics.mean(fracs), 4), round(statistics.mean(blocked), 3),
            round(statistics.mean(steps_s), 3), [round(f, 4) for f in fracs])


def summarize_peers(peers, out_dirs):
    """One method run from its peers' --json lines and log.csv files."""
    p0 = peers[0]
    vals = [j["final_val_loss"] for j in peers]
    if len({j["state_hash"] for j in peers}) != 1:
        raise RuntimeError(f"peers ended with different states: {[j['state_hash'] for j in peers]}")
    sent = [j["bytes_sent"]["total"] for j in peers]
    return {
        "val_loss": vals[0],
        "val_loss_spread_over_peers": round(max(vals) - min(vals), 6),
        "final_train_loss_peer0": p0["final_train_loss"],
        "unigram_entropy": p0["unigram_entropy"],
        "params": p0["params"],
        "steps": p0["steps"],
        "bytes_per_peer": round(statistics.mean(sent)),
        "bytes_per_peer_max": max(sent),
        "bytes_sent_peer0": p0["bytes_sent"],
        "bytes_received_per_peer": round(statistics.mean(j["bytes_received"]["total"] for j in peers)),
        "peak_event_bytes": max(j["peak_event_bytes"] for j in peers),
        "blocked_s": round(statistics.mean(j["blocked_s"] for j in peers), 3),
        # blocked_s counts the start collective and the final settle too; elapsed_s is step time.
        "blocked_fraction_whole_run": round(statistics.mean(j["blocked_s"] / j["elapsed_s"] for j in peers), 4),
        # The same between the first and next-to-last steps (steady_blocked_fraction).
        **dict(zip(("blocked_fraction", "blocked_s_steady", "step_s_steady", "blocked_fraction_per_peer"),
                   steady_blocked_fraction(out_dirs))),
        "elapsed_s": round(statistics.mean(j["elapsed_s"] for j in peers), 2),
        "tokens_per_s": round(statistics.mean(j["tokens_per_s"] for j in peers), 1),
        "tokens_per_s_sum": round(sum(j["tokens_per_s"] for j in peers), 1),
        "rounds_applied": p0["rounds_applied"],
        "rounds_dropped": p0["rounds_dropped"],
        "retries": p0["retries"],
        # The sparse codec's encodings, summed over each peer's settled rounds (0 or absent: dense).
        "sparse_encoded_bytes_per_peer": round(statistics.mean(j.get("sparse_encoded_bytes", 0) for j in peers)),
        "sync": p0["sync"],
    }


def _ok(r):
    return r is not None and "error" not in r


def _div(x, y):
    return x / y if x is not None and y else None


def sparse_wire_ratio(r, peers):
    """(ratio, f32 bytes of one contribution, wire bytes of one contribution): peer 0's data bytes
    per applied round over the N - 1 contributions an all-gather has each member send. Framing,
    the sizes, the round's mask all-reduce and any retry count against the codec, so this is a
    lower bound on sparse_codec_ratio (the encoding's own, below)."""
    if not _ok(r) or not r.get("rounds_applied"):
        return None, None, None
    per_contribution = r["bytes_sent_peer0"]["data"] / r["rounds_applied"] / (peers - 1)
    f32 = 4 * r["params"]
    return f32 / per_contribution, f32, per_contribution


def sparse_codec_ratio(r):
    """(ratio, f32 bytes of one contribution, encoded bytes of one contribution): what the codec
    made of each pseudo-gradient, as the engine counts it before any framing (lh_sync_stats'
    sparse_encoded_bytes over the rounds each peer settled, averaged over the peers)."""
    if not _ok(r) or not r.get("sparse_encoded_bytes_per_peer"):
        return None, None, None
    rounds = r["rounds_applied"] + r["rounds_dropped"]
    per_contribution = r["sparse_encoded_bytes_per_peer"] / rounds
    f32 = 4 * r["params"]
    return f32 / per_contribution, f32, per_contribution


def seed_ratios(methods, shaped, rates, loss=True, peers=4):
    """Every ratio of one seed, with its two terms: name -> (value, numerator, denominator).
    `loss` False: only the shaped passes' (bench/run diloco-wan)."""
    out = {}
    for name, ((field, a, b), _, _) in (RATIOS.items() if loss else ()):
        ra, rb = methods.get(a), methods.get(b)
        x = ra.get(field) if _ok(ra) else None
        y = rb.get(field) if _ok(rb) else None
        out[name] = (_div(x, y), x, y)
    co2 = methods.get("co2")
    if loss:
        out["sparse_wire_ratio"] = sparse_wire_ratio(methods.get(SPARSE), peers)
        out["sparse_codec_ratio"] = sparse_codec_ratio(methods.get(SPARSE))
        out["co2_blocked_fraction"] = ((co2["blocked_fraction"], co2["blocked_s_steady"], co2["step_s_steady"])
                                       if _ok(co2) and co2["blocked_fraction"] is not None
                                       else (None, None, None))
    dp = methods.get("dp")
    if _ok(dp) and dp["unigram_entropy"]:
        out["dp_val_loss_vs_unigram"] = (dp["val_loss"] / dp["unigram_entropy"], dp["val_loss"],
                                         dp["unigram_entropy"])
    for rate in rates:
        cus = shaped_cu(shaped.get(rate, {}))
        low = [(cus[k], k) for k in CU_METHODS if cus.get(k) is not None]
        if len(low) == len(CU_METHODS):
            v, k = min(low)
            out[f"cu_{rate}"] = (v, shaped[rate][k]["tokens_per_s_sum"], reference_tps(shaped[rate], k))
            out[f"cu_{rate}_lowest_of"] = k
        else:
            out[f"cu_{rate}"] = (None, None, None)
        out[f"cu_{rate}_dp"] = (cus.get("dp"), (shaped.get(rate, {}).get("dp") or {}).get("tokens_per_s_sum"),
                                reference_tps(shaped.get(rate, {}), "dp"))
    return out


def nosync_tps(lab):
    runs = [r["tokens_per_s"] for r in lab.get("nosync", []) if "error" not in r]
    return statistics.mean(runs) if runs else None


def reference_tps(lab, key):
    """The no-sync tokens/s method `key`'s cu divides by: the mean of the runs just before and
    just after its pass where the bench interleaved them, else the mean of every no-sync run."""
    r = lab.get(key) or {}
    near = [x for x in r.get("nosync_ref_tokens_per_s") or [] if x is not None]
    return statistics.mean(near) if near else nosync_tps(lab)


def shaped_cu(lab):
    return {k: _div(r.get("tokens_per_s_sum"), reference_tps(lab, k)) for k, r in lab.items()
            if isinstance(r, dict) and "tokens_per_s_sum" in r}


def _mean_std(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def _met(name, v):
    if v is None or name not in TARGETS:
        return None
    t, c = TARGETS[name]
    return v <= t if c == "<=" else v >= t


def _r(x, d=4):
    return None if x is None else round(x, d)


def build(seeds, p, peers, methods, shaped_keys, rates, wall_s, loads, loss=True):
    """The result object (its last line): ratios (mean over seeds), their std, their terms, the
    targets, and every method's raw figures. `loss` False: the shaped passes' figures only."""
    per_seed = {s: seed_ratios(d["methods"], d["shaped"], rates, loss, peers) for s, d in seeds.items()}
    first = next(iter(seeds.values()))
    out = {"bench": "diloco", "seeds": len(seeds), "peers": peers}
    dp_vals = [d["methods"]["dp"]["val_loss"] for d in seeds.values() if _ok(d["methods"].get("dp"))]
    uni = [d["methods"][k]["unigram_entropy"] for d in seeds.values() for k in methods
           if _ok(d["methods"].get(k))]
    out["dp_val_loss"] = _r(statistics.mean(dp_vals)) if dp_vals else None
    out["unigram_entropy"] = uni[0] if uni else None
    names = [n for n in per_seed[next(iter(per_seed))] if not n.endswith("_lowest_of")]
    terms, met = {}, {}
    for n in names:
        m, sd = _mean_std([per_seed[s][n][0] for s in per_seed])
        out[n] = _r(m)
        if len(seeds) > 1:
            out[n + "_std"] = _r(sd)
        terms[n] = [[_r(per_seed[s][n][1], 5), _r(per_seed[s][n][2], 5)] for s in per_seed]
        met[n] = _met(n, m)
    for rate in rates:
        out[f"cu_{rate}_lowest_of"] = [per_seed[s].get(f"cu_{rate}_lowest_of") for s in per_seed]
    out["targets"] = {n: f"{c} {t}" for n, (t, c) in TARGETS.items() if n in names}
    out["met"] = met
    out["ratio_terms_per_seed"] = terms
    out["methods"] = {k: _method_figures(k, seeds, p) for k in methods}
    out["shaped"] = {} if not rates else {rate: {"shaping": first["shaped"].get(rate, {}).get("shaping"),
                            "nosync_tokens_per_s": [nosync_tps(d["shaped"].get(rate, {})) for d in seeds.values()],
                            "cu": {k: [_r(shaped_cu(d["shaped"].get(rate, {})).get(k)) for d in seeds.values()]
                                   for k in shaped_keys},
                            "runs_per_seed": [d["shaped"].get(rate) for d in seeds.values()]}
                     for rate in rates}
    out["protocol"] = {k: v for k, v in p.items() if k != "h_scale"} | {
        "lr": f"3e-3 peak, {p['warmup']} warmup steps, cosine to 3e-4 at the last step (longhaul-train's)",
        "tokens_per_method": p["steps"] * p["batch"] * p["context"] * peers}
    out["wall_s"] = round(wall_s, 1)
    out["loadavg_start_end"] = loads
    return out


def _method_figures(key, seeds, p):
    runs = [d["methods"].get(key) for d in seeds.values()]
    good = [r for r in runs if _ok(r)]
    if not good:
        return {"error": (runs[0] or {}).get("error")}
    def mean(f):
        xs = [r[f] for r in good if r.get(f) is not None]
        return _r(statistics.mean(xs), 5) if xs else None
    fig = {f: mean(f) for f in ("val_loss", "bytes_per_peer", "peak_event_bytes", "blocked_s",
                                "blocked_fraction", "blocked_fraction_whole_run", "tokens_per_s",
                                "rounds_applied", "rounds_dropped")}
    fig["val_loss_per_seed"] = [r["val_loss"] if _ok(r) else None for r in runs]
    fig["bytes_per_peer_per_seed"] = [r["bytes_per_peer"] if _ok(r) else None for r in runs]
    fig["sync"] = good[0]["sync"]
    fig["params"] = good[0]["params"]
    fig["wall_s_per_seed"] = [r.get("wall_s") if _ok(r) else None for r in runs]
    fig["runs_per_seed"] = runs  # every figure of every run (bytes by kind, rounds, loads)
    return fig


# -- output ---------------------------------------------------------------------------------------

def _fmt(x, d=4):
    if x is None:
        return "-"
    if isinstance(x, float) and abs(x) >= 1000:
        return f"{x:,.0f}"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.{d}f}"


def print_table(res):
    m = res["methods"]
    dp = m.get("dp", {})
    print(f"protocol: {res['peers']} peers, {res['protocol']['steps']} steps x batch "
          f"{res['protocol']['batch']} x context {res['protocol']['context']} per peer, "
          f"{res['seeds']} seed(s); unigram entropy {_fmt(res['unigram_entropy'])} nats/byte")
    if m:
        print(f"{'method':<18}{'val loss':>10}{'vs dp':>8}{'bytes/peer':>16}{'dp/bytes':>10}"
              f"{'peak/event':>14}{'blocked s':>11}{'tok/s/peer':>12}")
    for k, f in m.items():
        if "error" in f:
            print(f"{k:<18} FAILED: {f['error'][:100]}")
            continue
        print(f"{k:<18}{_fmt(f['val_loss']):>10}{_fmt(_div(f['val_loss'], dp.get('val_loss'))):>8}"
              f"{_fmt(f['bytes_per_peer']):>16}{_fmt(_div(dp.get('bytes_per_peer'), f['bytes_per_peer']), 1):>10}"
              f"{_fmt(f['peak_event_bytes']):>14}{_fmt(f['blocked_s'], 2):>11}{_fmt(f['tokens_per_s'], 0):>12}")
    print(f"\n{'ratio':<34}{'value':>10}{'std':>8}  {'raw (numerator / denominator, per seed)':<44}{'target':>9}  met")
    for n, target in res["targets"].items():
        if n not in res:
            continue
        terms = "; ".join(f"{_fmt(a)} / {_fmt(b)}" for a, b in res["ratio_terms_per_seed"].get(n, []))
        print(f"{n:<34}{_fmt(res[n]):>10}{_fmt(res.get(n + '_std')):>8}  {terms:<44}{target:>9}  "
              f"{ {True: 'yes', False: 'NO', None: '-'}[res['met'].get(n)]}")
    for n in ("cu_100mbit_dp", "cu_10mbit_dp", "sparse_wire_ratio"):
        if n in res:
            terms = "; ".join(f"{_fmt(a)} / {_fmt(b)}" for a, b in res["ratio_terms_per_seed"].get(n, []))
            print(f"{n:<34}{_fmt(res[n]):>10}{_fmt(res.get(n + '_std')):>8}  {terms:<44}{'(none)':>9}")
    for rate, s in res["shaped"].items():
        if s["shaping"]:
            print(f"\ncu at {rate}: {s['shaping']}")
            for lab in s["runs_per_seed"]:
                _print_shaped(lab or {})


def _print_shaped(lab):
    """Each pass's cu with its raw terms (group tokens/s / no-sync tokens/s before and after it),
    its blocked fraction per peer, and the no-sync runs in order."""
    print(f"  {'pass':<24}{'cu':>7}{'tok/s':>9}{'no-sync before/after':>23}{'1-blocked':>11}  blocked per peer")
    for k, r in lab.items():
        if not isinstance(r, dict) or k in ("nosync", "shaping"):
            continue
        if "error" in r:
            print(f"  {k:<24} FAILED: {r['error'][:100]}")
            continue
        refs = "/".join(_fmt(x, 0) for x in r.get("nosync_ref_tokens_per_s") or [])
        per_peer = " ".join(_fmt(x, 3) for x in r.get("blocked_fraction_per_peer") or [])
        print(f"  {k:<24}{_fmt(_div(r['tokens_per_s_sum'], reference_tps(lab, k)), 3):>7}"
              f"{_fmt(r['tokens_per_s_sum'], 0):>9}{refs:>23}"
              f"{_fmt(1 - r['blocked_fraction'] if r.get('blocked_fraction') is not None else None, 3):>11}"
              f"  {per_peer}")
    print("  no-sync runs: " + ", ".join(f"{r.get('when')} {_fmt(r.get('tokens_per_s'), 0)}"
                                         for r in lab.get("nosync", [])))


def _read_losses(path):
    """(steps, train loss smoothed, validation steps, validation losses) of one log.csv."""
    steps, train, val_steps, vals = [], [], [], []
    ema = None
    with open(path) as f:
        for row in csv.DictReader(f):
            x = float(row["train_loss"])
            ema = x if ema is None else 0.9 * ema + 0.1 * x
            steps.append(int(row["step"]))
            train.append(ema)
            if row["val_loss"]:
                val_steps.append(int(row["step"]))
                vals.append(float(row["val_loss"]))
    return steps, train, val_steps, vals


def plot(seeds, res, out_dir):
    """Validation loss of theta_g against the step (the same tokens per step for every method),
    first seed: DiLoCo's H and codecs beside DP; Streaming, CO2 and eager beside DiLoCo H = 50."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    csvs = next(iter(seeds.values()))["csvs"]
    panels = [("DiLoCo: H and codec", ["dp", "diloco_h50_f32", "diloco_h50_u8", "diloco_h50_4bit",
                                         "diloco_h100_f32", "diloco_h100_u8", "diloco_h100_4bit"]),
              ("Streaming, CO2, eager (H = 50)", ["dp", "diloco_h50_f32", "streaming", "co2", "eager"])]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), dpi=100, sharey=True)
    uni = res.get("unigram_entropy")
    for ax, (title, keys) in zip(axes, panels):
        for k in keys:
            if k in csvs and os.path.exists(csvs[k]):
                s, t, vs, v = _read_losses(csvs[k])
                line, = ax.plot(vs, v, marker="o", markersize=4, label=k, linewidth=2 if k == "dp" else 1.3)
                ax.plot(s, t, color=line.get_color(), linewidth=0.6, alpha=0.45)
        if uni:
            ax.axhline(uni, color="gray", linestyle="--", linewidth=1, label="unigram entropy")
            ax.axhline(0.7 * uni, color="gray", linestyle=":", linewidth=1, label="0.7 x unigram")
        ax.set_title(title)
        ax.set_xlabel(f"step ({res['peers']} peers x {res['protocol']['batch']} x "
                      f"{res['protocol']['context']} bytes each)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("nats/byte")
    fig.suptitle("validation loss of theta_g (markers); peer 0's own train loss, EMA 0.9 (thin lines)", fontsize=10)
    if uni:
        axes[0].set_ylim(min(1.6, 0.6 * uni), uni + 0.6)
    fig.tight_layout()
    path = os.path.join(out_dir, "diloco_loss.png")
    fig.savefig(path)
    plt.close(fig)
    return path
