// A build without the CUDA runtime or without nccl.h: no NCCL local group.
#include "gpu/nccl_local_group.hpp"

namespace longhaul::gpu {

Result<std::unique_ptr<node::LocalGroup>> make_nccl_local_group(std::unique_ptr<node::LocalGroup>,
                                                                int, std::chrono::milliseconds) {
  return Status(LH_ERR_UNSUPPORTED,
                "NCCL local groups: this build of longhaul has no CUDA or was built without "
                "nccl.h (pip install nvidia-nccl-cu13, then rebuild with LONGHAUL_CUDA on)");
}

}  // namespace longhaul::gpu
