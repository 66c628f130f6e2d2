#!/usr/bin/env bash
# The GPU checks (issue 29), in two halves because the accelerator machine has nvcc, CMake and
# PyTorch but none of Debian's -dev packages, and is lent for minutes:
#
#   scripts/gpu-check.sh pack [BUILD]   here: builds BUILD (default build/default, CUDA on) and
#                                       copies what the checks run into build/gpu-pack (stripped
#                                       binaries, the Debian libraries they need, RPATH $ORIGIN),
#                                       under 64 MiB;
#   scripts/gpu-check.sh run [OUT]      there (carry build/gpu-pack): the gpu-labelled tests,
#                                       compute-sanitizer memcheck and racecheck on the small GPU
#                                       tests, the Python extension built there and its CUDA
#                                       tests, then bench/run gpu's measurements; every log and
#                                       the summary (gpu-check.md, for docs/gpu.md) go to OUT
#                                       (default $OUT, else gpu-check-out). Under 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
export PACK=build/gpu-pack

# Debian's libraries a packed binary needs, besides those every Linux has (glibc, libstdc++:
# the machine's newer ones serve, and PyTorch, started beside them, needs those).
debian_libs() {
  ldd "$@" | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so'
}

pack() {
  local build=${1:-build/default}
  set -e
  bash scripts/setup.sh
  [[ -f $build/build.ninja ]] || cmake --preset "$(basename "$build")" >/dev/null
  cmake --build "$build" -j"$(nproc)" --target longhaul longhaul-master longhaul-allreduce-worker \
    longhaul-gpu-bench gpu_codec_test gpu_allreduce_test gpu_state_test gpu_sync_test \
    gpu_hash_test gpu_staging_test gpu_nccl_local_group_test
  rm -rf "$PACK"
  mkdir -p "$PACK/lib"
  local files=(tools/longhaul-master/longhaul-master bench/allreduce/longhaul-allreduce-worker
               bench/gpu/longhaul-gpu-bench tests/unit/gpu/gpu_codec_test
               tests/unit/gpu/gpu_allreduce_test tests/unit/gpu/gpu_state_test
               tests/unit/gpu/gpu_sync_test tests/unit/gpu/gpu_hash_test
               tests/unit/gpu/gpu_staging_test tests/unit/gpu/gpu_nccl_local_group_test)
  for f in "${files[@]}"; do
    mkdir -p "$PACK/$(dirname "$f")"
    cp "$build/$f" "$PACK/$f"
  done
  cp -L "$build"/src/capi/liblonghaul.so.0 "$PACK/lib/"
  for lib in $(debian_libs "${files[@]/#/$build/}" "$build/src/capi/liblonghaul.so.0"); do
    cp -L "$lib" "$PACK/lib/"
  done
  strip --strip-unneeded "$PACK"/lib/*.so* "${files[@]/#/$PACK/}"
  for f in "${files[@]}"; do
    local up
    up=$(dirname "$f" | sed 's|[^/]*|..|g')
    patchelf --set-rpath "\$ORIGIN/$up/lib" "$PACK/$f"
  done
  patchelf --set-rpath '$ORIGIN' "$PACK"/lib/*.so*
  du -sh "$PACK"
}

# The Python extension, built on the GPU machine (its Python is not this machine's) against the
# packed library, with the machine's nanobind; the package lands in $1/py.
build_python_extension() {
  local dir=$1
  mkdir -p "$dir"
  cat >"$dir/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(longhaul_python_on_gpu LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
add_library(longhaul SHARED IMPORTED GLOBAL)
set_target_properties(longhaul PROPERTIES IMPORTED_LOCATION $PWD/$PACK/lib/liblonghaul.so.0
                      IMPORTED_SONAME liblonghaul.so.0 INTERFACE_INCLUDE_DIRECTORIES $PWD/include)
add_library(longhaul::longhaul ALIAS longhaul)
function(longhaul_target_warnings target)
endfunction()
add_subdirectory($PWD/bindings/python py)
CMAKE
  cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython_EXECUTABLE="$(command -v python3)" && cmake --build "$dir/build" -j"$(nproc)"
}

run() {
  local out=${1:-${OUT:-gpu-check-out}}
  mkdir -p "$out/logs"  # each step's whole log; packed into logs.tgz at the end
  local summary=$out/gpu-check.md status=0
  {
    echo "# scripts/gpu-check.sh run, $(date -u +%FT%TZ)"
    echo '```'
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
    echo '```'
  } >"$summary"
  # step NAME LIMIT_S COMMAND...: runs it (a command, or a function of this script), logs to
  # OUT/logs/NAME.log, notes the outcome. GPU_CHECK_STEPS="a b": only those steps run.
  step() {
    local name=$1 limit=$2
    shift 2
    [[ -z ${GPU_CHECK_STEPS:-} || " $GPU_CHECK_STEPS " == *" $name "* ]] || return 0
    local t0=$SECONDS rc
    timeout "$limit" bash -c '"$@"' step "$@" >"$out/logs/$name.log" 2>&1
    rc=$?
    ((rc == 0)) || status=1
    printf -- '- %s: exit %d in %d s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$summary"
    tail -n 25 "$out/logs/$name.log" | sed 's/^/      /' >>"$summary"
  }
  step gpu_codec_test 120 "$PACK/tests/unit/gpu/gpu_codec_test"
  step gpu_allreduce_test 120 "$PACK/tests/unit/gpu/gpu_allreduce_test"
  step gpu_state_test 120 "$PACK/tests/unit/gpu/gpu_state_test"
  step gpu_sync_test 120 "$PACK/tests/unit/gpu/gpu_sync_test"
  step gpu_hash_test 120 "$PACK/tests/unit/gpu/gpu_hash_test"
  step gpu_staging_test 120 "$PACK/tests/unit/gpu/gpu_staging_test"
  # NCCL from the machine's nvidia-nccl-cu13 wheel (torch's dependency there).
  LONGHAUL_NCCL_LIBRARY=${LONGHAUL_NCCL_LIBRARY:-$(python3 -c "import importlib.util as u, os; \
s = u.find_spec('nvidia.nccl'); print(os.path.join(list(s.submodule_search_locations)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)} \
    step gpu_nccl_local_group_test 120 "$PACK/tests/unit/gpu/gpu_nccl_local_group_test"
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)
  local small=--gtest_filter='Blockwise/GpuCodec.KernelsWriteTheCpuBytesBitForBit/u8:GpuCodecArguments.*'
  step memcheck 120 "${sanitizer:-compute-sanitizer}" --tool memcheck --error-exitcode 9 \
    "$PACK/tests/unit/gpu/gpu_codec_test" "$small"
  step racecheck 120 "${sanitizer:-compute-sanitizer}" --tool racecheck --error-exitcode 9 \
    "$PACK/tests/unit/gpu/gpu_codec_test" "$small"
  step memcheck_hash 120 "${sanitizer:-compute-sanitizer}" --tool memcheck --error-exitcode 9 \
    "$PACK/tests/unit/gpu/gpu_hash_test" --gtest_filter='GpuHash.TheLastBlock*:GpuHash.Unaligned*'
  # The staging pipeline's copies and host functions (copy_engine_cuda.cpp) under memcheck, and
  # its encoding and decoding kernels on stream-ordered scratch.
  step memcheck_staging 120 "${sanitizer:-compute-sanitizer}" --tool memcheck --error-exitcode 9 \
    "$PACK/tests/unit/gpu/gpu_allreduce_test" --gtest_filter='GpuAllReduce.InPlaceWithoutRestore*'
  step memcheck_staging_codec 120 "${sanitizer:-compute-sanitizer}" --tool memcheck \
    --error-exitcode 9 "$PACK/tests/unit/gpu/gpu_staging_test"
  step python_extension 240 build_python_extension /tmp/lh-python
  PYTHONPATH=/tmp/lh-python/build/py:tests/python/longhaul step python_cuda 120 \
    python3 -m pytest -q -p no:cacheprovider tests/python/longhaul/test_cuda.py \
    tests/python/longhaul/test_allreduce.py
  LONGHAUL_BUILD=$PACK step bench_gpu 330 python3 bench/e2e/gpu "${BENCH_ARGS[@]}"
  [[ -f $out/logs/bench_gpu.log ]] && tail -n 1 "$out/logs/bench_gpu.log" >"$out/bench_gpu.json"
  tar -czf "$out/logs.tgz" -C "$out" logs && rm -r "$out/logs"
  cat "$summary"
  return $status
}

export -f build_python_extension
BENCH_ARGS=()
case $mode in
  pack) pack "${2:-}" ;;
  run)
    shift
    out=${1:-}
    [[ $# -gt 0 ]] && shift
    BENCH_ARGS=("$@")
    run "$out"
    ;;
  *)
    echo "usage: scripts/gpu-check.sh pack [BUILD] | run [OUT [BENCH_ARGS...]]" >&2
    exit 2
    ;;
esac
