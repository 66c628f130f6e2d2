#!/usr/bin/env bash
# check_isa_symbols.sh [--allow-constructors] NAMESPACE OBJECT...: fails when an object file
# compiled for one instruction set
# - defines a symbol the linker may merge with another object's (weak, unique or common: an
#   inline function, a template instantiation, an inline variable) outside NAMESPACE: the linker
#   keeps one copy of such a symbol for the whole program, so an AVX-512 copy could end up run by
#   the scalar path on a CPU without AVX-512 (src/quant/isa_namespace.hpp);
# - or has code that runs at start-up (.init_array, .ctors: a static initialiser), which runs on
#   every CPU. --allow-constructors: a sanitizer build, whose instrumentation adds one to every
#   object (such a build is for the machine it was built on).
set -euo pipefail
allow_constructors=0
if [[ ${1:-} == --allow-constructors ]]; then
  allow_constructors=1
  shift
fi
namespace=${1:?usage: check_isa_symbols.sh [--allow-constructors] NAMESPACE OBJECT...}
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
  if ((!allow_constructors)) && readelf -SW "$object" | grep -qE '\.(init_array|ctors)'; then
    echo "$object has a static initialiser: code of this build that runs on every CPU"
    status=1
  fi
done
((status == 0)) && echo "$# objects: every shared symbol is inside $namespace, no static initialiser"
exit $status
