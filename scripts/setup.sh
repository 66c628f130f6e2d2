#!/usr/bin/env bash
# Installs everything longhaul needs to build, test and benchmark on a fresh Debian 12 machine.
# Idempotent: packages already present are not touched, so a second run takes a second.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  libasio-dev libssl-dev libzstd-dev libxxhash-dev libfmt-dev libuv1-dev
  libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  clang libclang-rt-14-dev libomp-14-dev clang-format
  iperf3 iproute2 openssl procps patchelf qemu-user
  libcpp-httplib-dev chromium prometheus
)
PIP_PACKAGES=(numpy matplotlib pytest mypy)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.13.0") else 1)' 2>/dev/null; then
  echo "setup: installing torch==2.13.0"
  "$PY" -m pip install -q torch==2.13.0
fi
for p in "${PIP_PACKAGES[@]}"; do
  "$PY" -c "import $p" 2>/dev/null || { echo "setup: installing $p"; "$PY" -m pip install -q "$p"; }
done
# NCCL for the GPU layer, loaded at run time (docs/gpu.md): the nvidia-nccl-cu13 wheel's libnccl.so.2
# (its loader's test needs no GPU).
"$PY" -c 'import importlib.util as u, sys; sys.exit(0 if u.find_spec("nvidia.nccl") else 1)' 2>/dev/null ||
  { echo "setup: installing nvidia-nccl-cu13"; "$PY" -m pip install -q nvidia-nccl-cu13; }
# The Python bindings (bindings/python): nanobind 2.x builds them, scikit-build-core packages them.
if ! "$PY" -c 'import nanobind, sys; sys.exit(0 if nanobind.__version__.startswith("2.") else 1)' 2>/dev/null; then
  echo "setup: installing nanobind 2.x"
  "$PY" -m pip install -q "nanobind>=2.4,<3"
fi
"$PY" -c "import scikit_build_core" 2>/dev/null || { echo "setup: installing scikit-build-core"; "$PY" -m pip install -q "scikit-build-core>=0.10"; }
