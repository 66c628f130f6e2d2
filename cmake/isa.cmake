# The instruction sets the kernels are built for, each picked at run time (src/common/cpu_isa.hpp):
# LONGHAUL_ISA_FLAGS_<isa> are the compile flags of that build. No -march=native anywhere: one
# build runs on every x86-64. -ffp-contract=off (warnings.cmake) keeps the FMA of x86-64-v3 out
# of every expression, so a wider build changes speed, never results.
set(LONGHAUL_ISAS scalar avx2 avx512)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(LONGHAUL_ISA_FLAGS_scalar "")
  set(LONGHAUL_ISA_FLAGS_avx2 -march=x86-64-v3)    # AVX2, FMA, F16C, BMI1/2, MOVBE
  set(LONGHAUL_ISA_FLAGS_avx512 -march=x86-64-v4)  # and AVX-512 F/BW/CD/DQ/VL
endif()
