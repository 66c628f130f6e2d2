#!/usr/bin/env bash
# check_isa_symbols.sh NAMESPACE OBJECT...: fails when an object file compiled for one instruction
# set defines a symbol the linker may merge with another object's (weak, unique or common: an
# inline function, a template instantiation, an inline variable) outside NAMESPACE. The linker
# keeps one copy of such a symbol for the whole program, so an AVX-512 copy could end up run by
# the scalar path on a CPU without AVX-512 (src/quant/isa_namespace.hpp).
set -euo pipefail
namespace=${1:?usage: check_isa_symbols.sh NAMESPACE OBJECT...}
shift
(($#)) || { echo "check_isa_symbols.sh: no object files given" >&2; exit 2; }
status=0
for object in "$@"; do
  # Allowed, the same two instructions' worth in every build: DW.ref.__gxx_personality_v0 (a
  # pointer to the C++ runtime's unwinder) and __clang_call_terminate (clang's call of
  # __cxa_begin_catch, then std::terminate).
  shared=$(nm -C --defined-only "$object" | awk '$2 ~ /^[WVuC]$/' |
    grep -v -e "$namespace" -e 'DW\.ref\.__gxx_personality_v0' -e ' __clang_call_terminate$' ||
    true)
  if [[ -n $shared ]]; then
    echo "$object defines symbols shared with other builds, outside $namespace:"
    echo "$shared"
    status=1
  fi
done
((status == 0)) && echo "$# objects: every shared symbol is inside $namespace"
exit $status
