#!/usr/bin/env bash
# The quick-start demo: installs what it needs, builds, then runs a longhaul master and four peers
# on this machine. The peers join, form a ring, all-reduce 64 MiB of f32 three times unquantized
# and three times with u8 blockwise quantization, print what they measured, and leave. Then
# longhaul-churn runs a master and four longhaul-peer daemons (all-reduce, apply, sync the shared
# state) for 20 s while it kills, stops and replaces peers, and checks that every peer at one
# revision holds the same state and that nobody hangs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default >/dev/null
build=build/default
export LD_LIBRARY_PATH="$PWD/$build/src/capi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$build/tools/longhaul-master/longhaul-master" --listen 127.0.0.1:0 --port-file "$work/port" \
  --log-level info 2>"$work/master.log" &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.05; done
port=$(cat "$work/port")
echo "longhaul master listening on 127.0.0.1:$port"

peers=4
for codec in none u8; do
  echo
  echo "== $peers peers, all-reduce of 64 MiB f32, codec $codec =="
  run=()
  for r in $(seq $peers); do
    "$build/bench/allreduce/longhaul-allreduce-worker" --master "127.0.0.1:$port" --world $peers \
      --bytes $((64 << 20)) --iterations 3 --codec $codec >"$work/peer$r.json" 2>"$work/peer$r.err" &
    run+=($!)
  done
  for p in "${run[@]}"; do wait "$p" || { echo "a peer failed:"; cat "$work"/peer*.err; exit 1; }; done
  python3 - "$work" "$peers" <<'PY'
import json, sys, glob
rows = [json.loads(open(f).read()) for f in sorted(glob.glob(sys.argv[1] + "/peer*.json"))]
for r in sorted(rows, key=lambda r: r["rank"]):
    print(f"  peer rank {r['rank']}: schedule {r['schedule']}, median {r['median_s'] * 1000:.0f} ms, "
          f"sent {r['bytes_sent'] / 2**20:.1f} MiB, received {r['bytes_received'] / 2**20:.1f} MiB")
PY
done
echo
echo "== what the master logged =="
grep -E "joined|epoch|left" "$work/master.log" | sed 's/^/  /' | tail -12

echo
echo "== churn: 4 longhaul-peer daemons for 20 s, a peer killed, stopped or replaced every ~3 s =="
"$build/tools/longhaul-churn/longhaul-churn" --peers 4 --duration 20 --kill-interval-ms 3000 \
  --min-alive 2 --seed 1 | sed 's/^/  /'
