#!/bin/sh
# Runs libFuzzer targets one after another, each for a fixed time, and fails on any finding: a
# crash, a failed check (they trap), a sanitizer report, a leak, an input over the memory limits or
# one that runs past 10 s. The ctest fuzz_60s (tests/unit/fuzz_replay/CMakeLists.txt) runs it.
#
#   run_fuzzers.sh <work-dir> <seconds> <fuzzer> <seed-dir|-> [flags...] [-- <seconds> <fuzzer> ...]
#
# Each target starts from a fresh copy of its seed directory in <work-dir> (libFuzzer writes the
# inputs it finds into its first corpus directory: the checked-in seeds are never changed). A
# finding leaves its input in <work-dir> (crash-*, leak-*, oom-*, timeout-*) and its log beside it.
set -u
if [ $# -lt 4 ]; then
  echo "usage: $0 <work-dir> <seconds> <fuzzer> <seed-dir|-> [flags...] [-- <seconds> ...]" >&2
  exit 2
fi
work=$1
shift
rm -rf "$work"
mkdir -p "$work" || exit 2

run_one() {
  seconds=$1
  fuzzer=$2
  seeds=$3
  shift 3
  name=$(basename "$fuzzer")
  corpus="$work/$name-corpus"
  mkdir -p "$corpus" || exit 2
  if [ "$seeds" != "-" ]; then cp "$seeds"/* "$corpus"/ || exit 2; fi
  log="$work/$name.log"
  echo "== $name: $seconds s from $(ls "$corpus" | wc -l) seeds"
  "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=512 -error_exitcode=1 \
    -timeout_exitcode=1 -print_final_stats=1 -artifact_prefix="$work/" "$@" "$corpus" >"$log" 2>&1
  rc=$?
  grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$log"
  if [ $rc -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log"; then
    echo "FAILED: $name exited $rc; its log ($log) ends:"
    tail -n 40 "$log"
    ls "$work" | grep -E '^(crash|leak|oom|timeout|slow-unit)-' | sed "s|^|finding: $work/|"
    exit 1
  fi
}

while [ $# -gt 0 ]; do
  seconds=$1
  fuzzer=$2
  seeds=$3
  shift 3
  flags=""
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    flags="$flags $1"
    shift
  done
  [ $# -gt 0 ] && shift  # the --
  # shellcheck disable=SC2086 # the flags are words
  run_one "$seconds" "$fuzzer" "$seeds" $flags
done
echo "no finding"
