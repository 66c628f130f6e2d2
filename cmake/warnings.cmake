# Project-wide compile flags. Reduction and quantization code must be bit-reproducible across
# peers, so floating-point contraction is off everywhere (no FMA fusing, no -ffast-math).
# The GPU layer's kernels (nvcc) get the same: no FMA contraction, IEEE division and square root,
# denormals kept (the host half of a .cu file goes through the host compiler with -ffp-contract=off).
add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-ffp-contract=off>
                    "$<$<COMPILE_LANGUAGE:CUDA>:--fmad=false;-prec-div=true;-prec-sqrt=true;-ftz=false;-Xcompiler=-ffp-contract=off>")

set(LONGHAUL_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion)
# GCC 12 reports maybe-uninitialized falsely through std::variant and std::optional moves,
# mismatched-new-delete falsely on Asio's coroutine frames (their class operator new/delete pair),
# and restrict falsely inside libstdc++'s std::string at -O3 (GCC PR 105329).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND LONGHAUL_WARNINGS -Wno-maybe-uninitialized -Wno-mismatched-new-delete -Wno-restrict)
endif()
# Clang checks the locking annotations (GUARDED_BY, REQUIRES, ...: src/common/thread_annotations.hpp)
# against every access; the clang-tsa preset builds with it (docs/testing.md).
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  list(APPEND LONGHAUL_WARNINGS -Wthread-safety)
endif()
if(LONGHAUL_WERROR)
  list(APPEND LONGHAUL_WARNINGS -Werror)
endif()

# Applies the project's warnings to a target we own (never to third-party code).
function(longhaul_target_warnings target)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:${LONGHAUL_WARNINGS}>")
  if(LONGHAUL_WERROR)
    # nvcc 13 reports an assignment of a [[nodiscard]] class's value as discarding it (2810).
    target_compile_options(${target} PRIVATE
                           "$<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings;--diag-suppress=2810>")
  endif()
endfunction()

if(LONGHAUL_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
elseif(LONGHAUL_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  # ThreadSanitizer does not model std::atomic_thread_fence, and GCC refuses it under -fsanitize
  # (-Werror=tsan). Asio's only fence in use is its "fenced block" around handler invocation, which
  # is redundant on Linux: every handler reaches its thread through a mutex-protected queue (the
  # scheduler, the reactor's per-descriptor state, the strand), which TSan does see. So the TSan
  # build compiles Asio without fenced blocks (a documented Asio configuration macro) instead of
  # silencing the warning: a fence anywhere else would still fail the build.
  add_compile_definitions(ASIO_DISABLE_FENCED_BLOCK)
elseif(NOT LONGHAUL_SANITIZE STREQUAL "")
  message(FATAL_ERROR "LONGHAUL_SANITIZE must be '', 'address' or 'thread'")
endif()
