// NCCL, loaded at first use with dlopen(RTLD_LOCAL), never linked: the same binary starts where
// there is no NCCL, and NCCL's symbols never clash with another copy in the process.
//
// Which library: the libnccl.so.2 the process has loaded already (PyTorch's, when torch is
// imported), so that one NCCL serves both; else LONGHAUL_NCCL_LIBRARY (a path); else
// "libnccl.so.2" on the loader's search path. The Python package points LONGHAUL_NCCL_LIBRARY at
// the nvidia-nccl-cu13 wheel's copy when that is installed and the variable is unset.
//
// Thread-safe; the library stays loaded until the process exits.
#pragma once

#include <string>

#include "common/status.hpp"

namespace longhaul::gpu {

struct NcclInfo {
  int version = 0;      // ncclGetVersion: major * 10000 + minor * 100 + patch
  std::string path;     // where it was loaded from, as dlinfo reports it
  bool reused = false;  // already loaded in the process (by PyTorch, say) before we asked
};

// Loads NCCL (once) and resolves every entry point longhaul uses. LH_ERR_UNSUPPORTED naming what
// was tried when no NCCL can be loaded, or naming the missing symbol for an NCCL too old; the
// answer is kept.
Result<NcclInfo> load_nccl();

// One of those entry points (load_nccl first; null when it failed or for a name not among them).
void* nccl_symbol(const char* name);

}  // namespace longhaul::gpu
