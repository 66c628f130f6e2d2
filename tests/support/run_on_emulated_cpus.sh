#!/usr/bin/env bash
# run_on_emulated_cpus.sh SOURCE_DIR BUILD_DIR: runs programs of a build on CPUs this machine is
# not, under QEMU's user-mode emulator: qemu64 (baseline x86-64 with SSE3, no SSSE3), Nehalem
# (x86-64-v2: SSE4.2, no AVX) and Haswell (AVX2, no AVX-512). QEMU emulates no AVX-512.
# QEMU reports only the emulated CPU's features, and an instruction it lacks raises SIGILL, so
# this proves what no run on the build machine can: the one build runs on every x86-64, picking
# the kernels that CPU has (common/cpu_isa.hpp), and nothing outside the per-ISA builds (a static
# initialiser, a table) uses a wider instruction. Exits 77 (skipped) without qemu-x86_64.
set -euo pipefail
source=${1:?usage: run_on_emulated_cpus.sh SOURCE_DIR BUILD_DIR}
build=${2:?usage: run_on_emulated_cpus.sh SOURCE_DIR BUILD_DIR}
command -v qemu-x86_64 >/dev/null || { echo "skipped: qemu-x86_64 is not installed"; exit 77; }
# OpenBLAS's kernels follow the ISA (src/train/blas.cpp) unless the environment forces a set
# the emulated CPU may lack.
unset OPENBLAS_CORETYPE LONGHAUL_FORCE_ISA
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
run() {  # CPU EXPECTED_ISA PROGRAM [ARGS...]
  local cpu=$1 isa=$2
  shift 2
  local log=$out/run.log
  if qemu-x86_64 -cpu "$cpu" "$@" >"$log" 2>&1; then
    echo "ok   $cpu: $(basename "$1")"
  else
    echo "FAIL $cpu: $* (exit $?)"
    grep -v "TCG doesn't support" "$log" | tail -20
    status=1
  fi
  if [[ $(basename "$1") == quant_isa_test ]] && ! grep -q "selected: $isa\$" "$log"; then
    echo "FAIL $cpu: expected the $isa kernels: $(grep 'cpu runs' "$log")"
    status=1
  fi
}
for spec in qemu64:scalar Nehalem:scalar Haswell:avx2; do
  cpu=${spec%%:*}
  isa=${spec#*:}
  run "$cpu" "$isa" "$build/tests/unit/quant/quant_isa_test"
  run "$cpu" "$isa" "$build/tests/unit/rng/rng_philox_test"
  run "$cpu" "$isa" "$build/tests/unit/sync/sync_outer_rules_isa_test"
  run "$cpu" "$isa" "$build/tests/unit/train/train_kernels_test"
  run "$cpu" "$isa" "$build/tools/longhaul-train/longhaul-train" --data "$source/README.md" \
    --layers 1 --channels 32 --heads 2 --context 32 --batch 2 --steps 3 --threads 1 \
    --val-every 3 --val-batches 1 --out "$out/train" --json
done
exit $status
