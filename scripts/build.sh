#!/usr/bin/env bash
# Configures and builds a CMake preset (default: "default") into build/PRESET.
# usage: scripts/build.sh [PRESET [TARGET...]]: the named targets only (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
shift || true
# Configure when the tree is new or the presets changed since (a preset's cache variables win).
if [[ ! -f build/$preset/build.ninja || CMakePresets.json -nt build/$preset/CMakeCache.txt ]]; then
  cmake --preset "$preset" >/dev/null
fi
targets=()
(($#)) && targets=(--target "$@")
cmake --build --preset "$preset" -j"$(nproc)" "${targets[@]}"
