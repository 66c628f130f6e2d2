# The instruction sets the kernels are built for, each picked at run time (src/common/cpu_isa.hpp):
# LONGHAUL_ISA_FLAGS_<isa> are the compile flags of that build. No -march=native anywhere: one
# build runs on every x86-64. -ffp-contract=off (warnings.cmake) keeps the FMA of x86-64-v3 out
# of every expression, so a wider build changes speed, never results.
set(LONGHAUL_ISAS scalar avx2 avx512)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  # Spelled out, so that a -march in CMAKE_CXX_FLAGS cannot turn the scalar build into another.
  set(LONGHAUL_ISA_FLAGS_scalar -march=x86-64 -mtune=generic)
  set(LONGHAUL_ISA_FLAGS_avx2 -march=x86-64-v3)    # AVX2, FMA, F16C, BMI1/2, MOVBE
  set(LONGHAUL_ISA_FLAGS_avx512 -march=x86-64-v4)  # and AVX-512 F/BW/CD/DQ/VL
  if(CMAKE_CXX_FLAGS MATCHES "-march=" OR CMAKE_C_FLAGS MATCHES "-march=")
    message(WARNING "CMAKE_CXX_FLAGS or CMAKE_C_FLAGS sets -march: everything outside the "
                    "kernels (the CPU detection included) then needs that CPU, so the build no "
                    "longer runs on every x86-64. The kernels choose their ISA at run time.")
  endif()
endif()
