#!/usr/bin/env bash
# Runs each given test program inside a new network namespace in which no interface is up (not
# even loopback): a test that opens a socket to anywhere fails there. Used for the `nonet` tests.
set -euo pipefail
if ! unshare -n true 2>/dev/null; then
  echo "run_in_empty_netns: cannot create a network namespace here (unshare -n needs root or" \
       "CAP_SYS_ADMIN)" >&2
  exit 1
fi
exec unshare -n bash -c '
  set -euo pipefail
  up=$(ip -o link show up 2>/dev/null | wc -l)
  if [[ $up -ne 0 ]]; then echo "run_in_empty_netns: $up interfaces are up" >&2; exit 1; fi
  for test in "$@"; do
    echo "== $test (network namespace with no interface up)"
    "$test" --gtest_brief=1
  done
' run_in_empty_netns "$@"
