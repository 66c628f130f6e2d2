#!/usr/bin/env bash
# Configures and builds a CMake preset (default: "default") into build/PRESET.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
[[ -f build/$preset/build.ninja ]] || cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j"$(nproc)"
