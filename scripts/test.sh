#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test.
# LONGHAUL_LONG=1 also runs the long soak and long benchmarks (excluded by default).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default
labels=()
[[ ${LONGHAUL_LONG:-0} == 1 ]] || labels=(-LE long)
ctest --test-dir build/default --output-on-failure -j"$(nproc)" --timeout 900 "${labels[@]}"
