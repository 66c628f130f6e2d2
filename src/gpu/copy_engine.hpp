// What moves bytes between the caller's memory and the pinned slots an operation runs on, without
// blocking the thread that asks: the staging pipeline (staging_pipeline.hpp) starts every copy of
// an operation at once and hears of each one's arrival from the engine.
//
// Two engines: the CUDA one (copies on the device's copy stream, each arrival reported by a host
// function on a stream of its own that waits for the copy by an event, so nothing polls and no
// report holds back a copy), and the host one, which copies host memory on the worker pool: the
// same pipeline, run and tested where there is no GPU.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "common/status.hpp"
#include "quant/codec.hpp"
#include "runtime/worker_pool.hpp"

namespace longhaul::gpu {

class CopyEngine {
 public:
  using Done = std::function<void(Status)>;
  virtual ~CopyEngine() = default;
  // Starts copying `bytes` from `from` to `to`; neither may be touched by anyone else until
  // `done` has run. `done` runs exactly once, on another thread (the engine's), or on this one
  // when the copy could not start: OK once the bytes have arrived, otherwise why not. It must not
  // call back into the engine.
  virtual void copy(void* to, const void* from, std::size_t bytes, Done done) = 0;
  // Whether encode_copy from, and decode_copy to, the memory at `where` can run `codec` there.
  virtual bool runs_codec(quant::Codec codec, const void* where) const = 0;
  // Encodes `count` floats at `from` (the caller's memory) with `codec` and `block` where they
  // live, and copies the encoding (quant::encoded_size bytes, the bytes quant::encode gives) to
  // `to`: only the encoded bytes cross. Otherwise as copy().
  virtual void encode_copy(void* to, const float* from, std::size_t count, quant::Codec codec,
                           std::size_t block, Done done) = 0;
  // Copies an encoding (quant::encoded_size(count, codec, block) bytes at `from`, host memory)
  // to where `to` lives and decodes it there into `count` floats: only the encoded bytes cross.
  // The floats are quant::decode's. Otherwise as copy().
  virtual void decode_copy(void* to, const std::byte* from, std::size_t count, quant::Codec codec,
                           std::size_t block, Done done) = 0;
  // Called once the `done` of every copy the caller started has run: a failure none of them could
  // report (the CUDA engine: an error the device met running them, which the runtime reports to
  // later calls). Does not wait for copies other callers started meanwhile.
  virtual Status settle() = 0;
};

// The CPU codecs over host memory, as an engine's encode_copy and decode_copy run them: `to` and
// `from` hold the sizes quant::encoded_size gives.
Status encode_on_host(void* to, const float* from, std::size_t count, quant::Codec codec,
                      std::size_t block);
Status decode_on_host(void* to, const std::byte* from, std::size_t count, quant::Codec codec,
                      std::size_t block);

// Copies between host buffers as worker tasks (memcpy; quant::encode for encode_copy). `workers`
// must outlive the engine and every copy it started.
class HostCopyEngine final : public CopyEngine {
 public:
  explicit HostCopyEngine(runtime::WorkerPool& workers) : workers_(workers) {}
  void copy(void* to, const void* from, std::size_t bytes, Done done) override;
  bool runs_codec(quant::Codec codec, const void*) const override {
    return codec != quant::Codec::kNone;
  }
  void encode_copy(void* to, const float* from, std::size_t count, quant::Codec codec,
                   std::size_t block, Done done) override;
  void decode_copy(void* to, const std::byte* from, std::size_t count, quant::Codec codec,
                   std::size_t block, Done done) override;
  Status settle() override { return Status::ok(); }

 private:
  runtime::WorkerPool& workers_;
};

// The engine for copies between the device that owns `device_pointer` and host memory, on that
// device's copy stream. LH_ERR_UNSUPPORTED "no CUDA device: ..." where CUDA cannot be used.
Result<std::shared_ptr<CopyEngine>> cuda_copy_engine(const void* device_pointer);

}  // namespace longhaul::gpu
