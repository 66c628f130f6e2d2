// copy_engine.hpp's CUDA engine where the library is built without CUDA.
#include "gpu/copy_engine.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

Result<std::shared_ptr<CopyEngine>> cuda_copy_engine(const void*) {
  if (Status s = cuda_available(); !s) return s;
  return Status(LH_ERR_UNSUPPORTED, "no CUDA device: longhaul was built without CUDA");
}

}  // namespace longhaul::gpu
