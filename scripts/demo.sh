#!/usr/bin/env bash
# The quick-start demo: installs what it needs, builds, then runs what longhaul is for on this
# machine. A longhaul master and four longhaul-train peers train one byte-level GPT together with
# DiLoCo (500 local AdamW steps between syncs would be the paper's; here H = 50, pseudo-gradients
# quantized to u8 on the wire), each on its own shard of Python's standard library. On the way one
# peer is killed with SIGKILL and a replacement joins the running group: it downloads theta_g and
# the group's step and trains on. At the end: the validation loss of theta_g, the bytes each peer
# sent beside what data-parallel training (a gradient all-reduce every step) would have sent, and
# the loss curve as a PNG.
#
# DEMO_STEPS (default 2400, about three and a half minutes on 2 cores) sets the length; DEMO_OUT (default ./demo-out) where the logs, CSVs and
# loss.png go.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Only what the demo runs: the master and the trainer (and the library they load).
bash scripts/build.sh default longhaul-master longhaul-train >/dev/null
build=build/default
export LD_LIBRARY_PATH="$PWD/$build/src/capi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
steps=${DEMO_STEPS:-2400}
peers=4
out=$(realpath -m "${DEMO_OUT:-demo-out}")
rm -rf "$out"
mkdir -p "$out"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

"$build/tools/longhaul-master/longhaul-master" --listen 127.0.0.1:0 --port-file "$out/port" \
  --log-level info 2>"$out/master.log" &
pids+=($!)
for _ in $(seq 100); do [[ -s $out/port ]] && break; sleep 0.05; done
master=127.0.0.1:$(cat "$out/port")
echo "longhaul master on $master; $peers peers train one GPT with DiLoCo for $steps steps"

# One model, schedule and sync configuration for every peer; each reads its own shard.
train_args=(--master "$master" --listen 127.0.0.1:0 --peers $peers --steps "$steps"
  --layers 4 --channels 96 --heads 4 --context 64 --batch 8 --threads 1 --warmup 50
  --method diloco --sync-every 50 --codec u8 --val-every 100 --val-batches 8 --json)
start_peer() {  # NAME [EXTRA ARGS...]
  local name=$1
  shift
  "$build/tools/longhaul-train/longhaul-train" "${train_args[@]}" --out "$out/$name" "$@" \
    >"$out/$name.json" 2>"$out/$name.log" &
  pids+=($!)
}
for i in $(seq 0 $((peers - 1))); do start_peer "peer$i" --peer-index "$i"; done
group=("${pids[@]:1}")

# Follow peer 0's progress line; at a third of the run, kill peer 3 and start its replacement.
# The progress line begins "step N/TOTAL"; the slash tells it from other figures on the line.
step_of() { { grep -o 'step [0-9]*/' "$out/$1.log" 2>/dev/null || true; } | tail -1 | tr -dc 0-9; }
killed=
shown=
while kill -0 "${group[0]}" 2>/dev/null; do
  s=$(step_of peer0)
  if [[ -n $s && $s != "$shown" ]]; then
    printf '\r  peer 0 at step %s/%s ' "$s" "$steps"
    shown=$s
  fi
  if [[ -z $killed && -n $s && $s -ge $((steps / 3)) ]]; then
    { kill -KILL "${group[3]}" && wait "${group[3]}"; } 2>/dev/null || true  # reaped quietly
    killed=$s
    printf '\n  step %s: peer 3 killed (SIGKILL); a replacement joins the running group\n' "$s"
    start_peer peer3-replacement --peer-index 3 --join
    group[3]=${pids[-1]}
  fi
  sleep 1
done
echo
if [[ -z $killed ]]; then
  echo "peer 0's progress never reached step $((steps / 3)) while it ran: no peer was replaced" >&2
  exit 1
fi
for i in 0 1 2 3; do
  wait "${group[$i]}" || { echo "peer $i failed:"; tail -5 "$out"/peer*.log; exit 1; }
done

python3 - "$out" "$peers" "$steps" <<'PY'
import json, sys
out, peers, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = ["peer0", "peer1", "peer2", "peer3-replacement"]
runs = {n: json.loads(open(f"{out}/{n}.json").read().splitlines()[-1]) for n in names}
first = runs["peer0"]
hashes = {r["state_hash"] for r in runs.values()}
print(f"theta_g on every peer: {'identical' if len(hashes) == 1 else 'DIFFERENT'} "
      f"(state hash {first['state_hash']})")
print(f"validation loss of theta_g: {first['final_val_loss']:.4f} nats/byte "
      f"(the corpus's unigram entropy: {first['unigram_entropy']:.4f})")
print(f"model: {first['params']} parameters; {steps} steps of {first['batch']} x "
      f"{first['context']} bytes per peer")
sent = first["bytes_sent"]["data"]
# A ring all-reduce of the f32 gradients every step: each peer sends 2 (N-1)/N of the model.
dp = 2 * (peers - 1) / peers * 4 * first["params"] * steps
print(f"bytes sent by peer 0 (pseudo-gradients, u8 every 50 steps): {sent / 1e6:.2f} MB")
print(f"data-parallel would have sent (f32 gradients every step, ring): {dp / 1e6:.1f} MB "
      f"= {dp / sent:.0f}x more")
print(f"rounds applied {first['rounds_applied']}, dropped {first['rounds_dropped']}, "
      f"retried {first['retries']}; peer 0 blocked {first['blocked_s']:.1f} s")
print(f"loss curve: {out}/peer0/loss.png (CSV: {out}/peer0/log.csv)")
sys.exit(0 if len(hashes) == 1 else 1)
PY
echo
echo "== what the master logged =="
grep -E "joined|left|lost|evicted" "$out/master.log" | sed 's/^/  /' | tail -12
