#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test.
# LONGHAUL_LONG=1 also runs the long soak and long benchmarks (excluded by default).
# The default preset also builds the clang-tsa preset (library and tools only) first: clang's
# -Wthread-safety checks the locking annotations at compile time (docs/testing.md).
#
# Sanitizers (docs/testing.md): `bash scripts/test.sh --preset asan` or `--preset tsan` builds that
# preset and runs the suite under it with the sanitizer options below; any further arguments go
# to ctest (e.g. `-R Link`). LONGHAUL_BUILD_DIR overrides the build tree (default build/PRESET).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=default
excluded=()
if [[ ${1:-} == --preset ]]; then
  preset=${2:?usage: scripts/test.sh [--preset default|asan|tsan] [CTEST_ARGS...]}
  shift 2
fi
case $preset in
  default) ;;
  asan)
    # Any finding fails its test: ASan aborts, UBSan is -fno-sanitize-recover (cmake/warnings.cmake),
    # LeakSanitizer runs at exit. The Python tests run the instrumented C++ programs as child
    # processes (nothing instrumented is loaded into the interpreter), so they need no preload.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    # The install test builds the examples against the installed (instrumented) library with
    # the plain compiler flags, and the ASan runtime refuses to start when it is not the first
    # library loaded; the default preset runs it.
    excluded=(-E '^integration_install_find_package$')
    ;;
  tsan)
    # Every report fails its test. Suppressions, if any are ever needed, belong in
    # tests/support/tsan.supp with the reason for each (docs/testing.md).
    supp=
    [[ -f tests/support/tsan.supp ]] && supp=:suppressions=$PWD/tests/support/tsan.supp
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1$supp}
    ;;
  *)
    echo "scripts/test.sh: unknown preset '$preset' (default, asan, tsan)" >&2
    exit 2
    ;;
esac
bash scripts/setup.sh
[[ $preset != default ]] || bash scripts/build.sh clang-tsa
build=${LONGHAUL_BUILD_DIR:-build/$preset}
if [[ $build == "build/$preset" ]]; then
  bash scripts/build.sh "$preset"
else
  [[ -f $build/build.ninja ]] || cmake --preset "$preset" -B "$build" >/dev/null
  cmake --build "$build" -j"$(nproc)"
fi
labels=()
[[ ${LONGHAUL_LONG:-0} == 1 ]] || labels=(-LE long)
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 900 "${labels[@]}" "${excluded[@]}" "$@"
