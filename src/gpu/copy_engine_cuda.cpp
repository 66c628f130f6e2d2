// copy_engine.hpp's CUDA engine: copies on the device's copy stream, each followed by an event
// that a host function on the notify stream waits for and then reports its arrival
// (cudaLaunchHostFunc), so completions reach the pipeline without anyone polling or blocking a
// thread per copy, and without a report holding back the copies behind it. Encoded copies run the
// codec kernel on the compute stream first, into scratch_ring.hpp's slots.
#include <cuda_runtime_api.h>

#include <memory>
#include <utility>

#include "gpu/codec_device.hpp"
#include "gpu/codec_kernels.hpp"
#include "gpu/copy_engine.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/scratch_ring.hpp"

namespace longhaul::gpu {

namespace {

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(int device, cudaStream_t stream, cudaStream_t compute, cudaStream_t notify,
                 ScratchRing* scratch)
      : device_(device), stream_(stream), compute_(compute), notify_(notify), scratch_(scratch) {}

  void copy(void* to, const void* from, std::size_t bytes, Done done) override {
    DeviceScope scope(device_);
    if (!scope.status()) return done(scope.status());
    if (Status s = cuda_check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream_),
                              "staging copy");
        !s)
      return done(s);
    report_arrival(std::move(done));
  }

  // Where the codec has kernels (codec_device.hpp), the device has scratch for them, and `where`
  // is this device's memory: the kernels run on this device only.
  bool runs_codec(quant::Codec codec, const void* where) const override {
    return runs_on_device(codec) && scratch_ != nullptr && device_owning(where) == device_;
  }

  void encode_copy(void* to, const float* from, std::size_t count, quant::Codec codec,
                   std::size_t block, Done done) override {
    auto bytes = quant::encoded_size(count, codec, block);
    if (!bytes) return done(bytes.status());
    DeviceScope scope(device_);
    if (!scope.status()) return done(scope.status());
    if (Status s = enqueue_encode_copy(to, from, count, codec, block, *bytes); !s) {
      // What was queued may still read `from` or write `to`.
      (void)cudaStreamSynchronize(compute_);
      (void)cudaStreamSynchronize(stream_);
      return done(s);
    }
    report_arrival(std::move(done));
  }

  // The kernel decodes on the copy stream, right after its bytes arrive: the arrival reported
  // after it then means the values are there.
  void decode_copy(void* to, const std::byte* from, std::size_t count, quant::Codec codec,
                   std::size_t block, Done done) override {
    auto bytes = quant::encoded_size(count, codec, block);
    if (!bytes) return done(bytes.status());
    DeviceScope scope(device_);
    if (!scope.status()) return done(scope.status());
    if (Status s = enqueue_decode_copy(to, from, count, codec, block, *bytes); !s) {
      (void)cudaStreamSynchronize(stream_);  // what was queued may still read `from`
      return done(s);
    }
    report_arrival(std::move(done));
  }

  // The caller's copies have all run (each one's host function ran after it). An error the device
  // met is sticky: the runtime returns it to any later call. cudaStreamQuery asks without waiting
  // for other operations' copies queued on the same stream since (a stream synchronisation would
  // make this operation wait for them).
  Status settle() override {
    DeviceScope scope(device_);
    LH_RETURN_IF_ERROR(scope.status());
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaErrorNotReady) return Status::ok();  // later copies, not an error
    return cuda_check(e, "staging copies");
  }

 private:
  // The kernel encodes into a scratch slot on the compute stream (so it overlaps the copies of
  // earlier segments); the copy stream waits for it and copies the encoding out, after which the
  // slot is free again (scratch_ring.hpp).
  Status enqueue_encode_copy(void* to, const float* from, std::size_t count, quant::Codec codec,
                             std::size_t block, std::size_t bytes) {
    return scratch_->with_slot(bytes, compute_, stream_, [&](void* scratch) -> Status {
      LH_RETURN_IF_ERROR(cuda_check(
          launch_encode(codec, from, count, block, static_cast<std::byte*>(scratch), compute_),
          "encoding a staged segment"));
      LH_RETURN_IF_ERROR(waits_for(stream_, compute_));
      return cuda_check(cudaMemcpyAsync(to, scratch, bytes, cudaMemcpyDeviceToHost, stream_),
                        "staging copy of an encoding");
    });
  }

  Status enqueue_decode_copy(void* to, const std::byte* from, std::size_t count, quant::Codec codec,
                             std::size_t block, std::size_t bytes) {
    return scratch_->with_slot(bytes, stream_, stream_, [&](void* scratch) -> Status {
      LH_RETURN_IF_ERROR(
          cuda_check(cudaMemcpyAsync(scratch, from, bytes, cudaMemcpyHostToDevice, stream_),
                     "staging copy of an encoding"));
      return cuda_check(launch_decode(codec, static_cast<const std::byte*>(scratch), count, block,
                                      static_cast<float*>(to), stream_),
                        "decoding a staged segment");
    });
  }

  // What `waiter` runs next waits for everything queued on `waited` so far.
  static Status waits_for(cudaStream_t waiter, cudaStream_t waited) {
    cudaEvent_t reached;
    LH_RETURN_IF_ERROR(
        cuda_check(cudaEventCreateWithFlags(&reached, cudaEventDisableTiming), "cudaEventCreate"));
    Status s = cuda_check(cudaEventRecord(reached, waited), "cudaEventRecord");
    if (s) s = cuda_check(cudaStreamWaitEvent(waiter, reached, 0), "cudaStreamWaitEvent");
    // The runtime releases the event once the work waiting on it is done.
    const Status destroyed = cuda_check(cudaEventDestroy(reached), "cudaEventDestroy");
    return s ? destroyed : s;
  }

  // Queues the host function that reports arrival once everything queued so far on the copy
  // stream has run. It runs on the notify stream: on the copy stream, the next copy would wait for
  // the function to return (with 1 MiB segments, staging ran at 0.28x of one plain cudaMemcpy on
  // an H200). It runs on the runtime's callback thread and must not call CUDA; the pipeline's
  // callbacks do not.
  void report_arrival(Done done) {
    auto* arrival = new Done(std::move(done));
    Status s = waits_for(notify_, stream_);
    if (s) s = cuda_check(cudaLaunchHostFunc(notify_, &arrived, arrival), "cudaLaunchHostFunc");
    if (!s) {
      std::unique_ptr<Done> owned(arrival);
      (void)cudaStreamSynchronize(stream_);  // the copy may still be reading its source
      (*owned)(s);
    }
  }

  static void arrived(void* user) {
    std::unique_ptr<Done> done(static_cast<Done*>(user));
    (*done)(Status::ok());
  }

  const int device_;
  const cudaStream_t stream_;   // the copies
  const cudaStream_t compute_;  // the encoding kernels
  const cudaStream_t notify_;   // the reports of arrival
  ScratchRing* const scratch_;  // null: nothing is encoded or decoded here
};

}  // namespace

Result<std::shared_ptr<CopyEngine>> cuda_copy_engine(const void* device_pointer) {
  LH_RETURN_IF_ERROR(cuda_available());
  const int device = device_owning(device_pointer);
  if (device < 0) return invalid_argument("staging: the buffer is not device memory");
  auto stream = stream_for(device, StreamRole::kCopy);
  if (!stream) return stream.status();
  auto compute = stream_for(device, StreamRole::kCompute);
  if (!compute) return compute.status();
  auto notify = stream_for(device, StreamRole::kNotify);
  if (!notify) return notify.status();
  // Without scratch (no stream-ordered allocation: some virtualised GPUs) nothing is encoded on
  // the device: the segments travel as values, as they would to a CPU.
  auto scratch = ScratchRing::of(device);
  return std::shared_ptr<CopyEngine>(std::make_shared<CudaCopyEngine>(
      device, *stream, *compute, *notify, scratch ? *scratch : nullptr));
}

}  // namespace longhaul::gpu
