// The entry points of codec.hpp: each checks its arguments, pins the FP environment and runs the
// selected ISA's kernel (kernels.hpp; the kernels themselves are codec_kernels.cpp and e3m0.cpp).
#include "quant/codec.hpp"

#include <fmt/format.h>

#include "quant/codec_layout.hpp"
#include "quant/fp_env.hpp"
#include "quant/kernels.hpp"

namespace longhaul::quant {

using layout::check_sizes;

Status encode(std::span<const float> in, std::span<std::byte> out, Codec codec, std::size_t block) {
  LH_RETURN_IF_ERROR(check_sizes(in.size(), out.size(), codec, block, "encode"));
  if (in.empty()) return Status::ok();
  return run_selected(
      [&](const Kernels& k) { k.encode(in.data(), in.size(), out.data(), codec, block); });
}

Status encode_portable(std::span<const float> in, std::span<std::byte> out, Codec codec,
                       std::size_t block) {
  LH_RETURN_IF_ERROR(check_sizes(in.size(), out.size(), codec, block, "encode_portable"));
  if (in.empty()) return Status::ok();
  ScopedDefaultFpEnv fp_env;
  kernels_for(Isa::kScalar).encode(in.data(), in.size(), out.data(), codec, block);
  return Status::ok();
}

Status decode(std::span<const std::byte> in, std::span<float> out, Codec codec, std::size_t block) {
  LH_RETURN_IF_ERROR(check_sizes(out.size(), in.size(), codec, block, "decode"));
  if (out.empty()) return Status::ok();
  return run_selected([&](const Kernels& k) {
    k.decode(in.data(), out.size(), out.data(), codec, block, Sink::kStore);
  });
}

Status decode_accumulate(std::span<const std::byte> in, std::span<float> acc, Codec codec,
                         std::size_t block) {
  LH_RETURN_IF_ERROR(check_sizes(acc.size(), in.size(), codec, block, "decode_accumulate"));
  if (acc.empty()) return Status::ok();
  return run_selected([&](const Kernels& k) {
    k.decode(in.data(), acc.size(), acc.data(), codec, block, Sink::kAdd);
  });
}

Status encode_with_error_feedback(std::span<const float> in, std::span<float> residual,
                                  std::span<std::byte> out, Codec codec, std::size_t block) {
  if (residual.size() != in.size()) {
    return invalid_argument(
        fmt::format("encode_with_error_feedback: residual has {} elements, "
                    "input {}",
                    residual.size(), in.size()));
  }
  LH_RETURN_IF_ERROR(
      check_sizes(in.size(), out.size(), codec, block, "encode_with_error_feedback"));
  if (in.empty()) return Status::ok();
  return run_selected([&](const Kernels& k) {
    k.encode_with_error_feedback(in.data(), residual.data(), in.size(), out.data(), codec, block);
  });
}

}  // namespace longhaul::quant
