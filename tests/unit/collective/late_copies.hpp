// A copy engine for the GPU layer's staging pipeline (gpu/staging_pipeline.hpp) without a device:
// host copies (and the CPU codecs, for the encoded ones) that finish late, in an order of their
// own, on threads of their own, as a device's copies report back.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>

#include <asio/steady_timer.hpp>

#include "gpu/codec_device.hpp"
#include "gpu/copy_engine.hpp"
#include "group_fixture.hpp"
#include "quant/codec.hpp"

namespace longhaul::collective::testing {

// The threads late copies arrive on. They outlive every engine: the last reference to an engine
// may be dropped on one of them (a finished operation let go of there), and a thread cannot join
// itself.
inline LinkThreads& copy_threads() {
  static auto* threads = new LinkThreads(2);
  return *threads;
}

// Host copies that arrive after 0-499 µs each, on copy_threads(), so later copies often arrive
// first. The copy that `fails` names reports an error instead.
// Which copy of a LateCopies fails: number `nth` of all (counted from 1), or the first encoding
// or decoding one.
struct FailingCopy {
  size_t nth = 0;
  bool first_encode = false;
  bool first_decode = false;
};

class LateCopies final : public gpu::CopyEngine {
 public:
  explicit LateCopies(FailingCopy fails = {}) : fails_(fails) {}

  void copy(void* to, const void* from, std::size_t bytes, Done done) override {
    later(
        [to, from, bytes] {
          std::memcpy(to, from, bytes);
          return Status::ok();
        },
        false, std::move(done));
  }
  // As the CUDA engine: the codecs with device kernels.
  bool runs_codec(quant::Codec codec, const void*) const override {
    return gpu::runs_on_device(codec);
  }
  void encode_copy(void* to, const float* from, std::size_t count, quant::Codec codec,
                   std::size_t block, Done done) override {
    const bool fail = fails_.first_encode && encoded_++ == 0;
    later([=] { return gpu::encode_on_host(to, from, count, codec, block); }, fail,
          std::move(done));
  }
  void decode_copy(void* to, const std::byte* from, std::size_t count, quant::Codec codec,
                   std::size_t block, Done done) override {
    const bool fail = fails_.first_decode && decoded_++ == 0;
    later([=] { return gpu::decode_on_host(to, from, count, codec, block); }, fail,
          std::move(done));
  }
  Status settle() override { return Status::ok(); }
  size_t encoded() const { return encoded_; }

 private:
  void later(std::function<Status()> work, bool fail, Done done) {
    const size_t n = ++copies_;
    fail = fail || n == fails_.nth;
    const auto delay = std::chrono::microseconds((n * 7919) % 500);
    auto timer = std::make_shared<asio::steady_timer>(copy_threads().executor(), delay);
    timer->async_wait(
        [timer, fail, work = std::move(work), done = std::move(done)](std::error_code) {
          if (fail) return done(Status(LH_ERR_INTERNAL, "copy failed on purpose"));
          done(work());
        });
  }

  const FailingCopy fails_;
  std::atomic<size_t> copies_{0};
  std::atomic<size_t> encoded_{0};
  std::atomic<size_t> decoded_{0};
};

}  // namespace longhaul::collective::testing
