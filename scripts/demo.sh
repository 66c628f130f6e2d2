#!/usr/bin/env bash
# The quick-start demo: installs dependencies, builds, and runs longhaul on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh default
exec bench/run link
