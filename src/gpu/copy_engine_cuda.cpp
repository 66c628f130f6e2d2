// copy_engine.hpp's CUDA engine: copies on the device's copy stream, each followed by a host
// function that reports its arrival (cudaLaunchHostFunc), so completions reach the pipeline
// without anyone polling or blocking a thread per copy.
#include <cuda_runtime_api.h>

#include <memory>
#include <utility>

#include "gpu/copy_engine.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"

namespace longhaul::gpu {

namespace {

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  void copy(void* to, const void* from, std::size_t bytes, Done done) override {
    DeviceScope scope(device_);
    if (!scope.status()) return done(scope.status());
    if (Status s = cuda_check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream_),
                              "staging copy");
        !s)
      return done(s);
    // The host function runs on the runtime's callback thread once the copy has arrived; it
    // must not call CUDA, and the pipeline's callbacks do not.
    auto* arrival = new Done(std::move(done));
    if (Status s = cuda_check(cudaLaunchHostFunc(stream_, &arrived, arrival), "cudaLaunchHostFunc");
        !s) {
      std::unique_ptr<Done> owned(arrival);
      (void)cudaStreamSynchronize(stream_);  // the copy may still be reading `from`
      (*owned)(s);
    }
  }

  Status settle() override {
    DeviceScope scope(device_);
    LH_RETURN_IF_ERROR(scope.status());
    return cuda_check(cudaStreamSynchronize(stream_), "staging copies");
  }

 private:
  static void arrived(void* user) {
    std::unique_ptr<Done> done(static_cast<Done*>(user));
    (*done)(Status::ok());
  }

  const int device_;
  const cudaStream_t stream_;
};

}  // namespace

Result<std::shared_ptr<CopyEngine>> cuda_copy_engine(const void* device_pointer) {
  LH_RETURN_IF_ERROR(cuda_available());
  const int device = device_owning(device_pointer);
  if (device < 0) return invalid_argument("staging: the buffer is not device memory");
  auto stream = stream_for(device, StreamRole::kCopy);
  if (!stream) return stream.status();
  return std::shared_ptr<CopyEngine>(std::make_shared<CudaCopyEngine>(device, *stream));
}

}  // namespace longhaul::gpu
