#include "gpu/copy_engine.hpp"

#include <cstring>
#include <utility>

namespace longhaul::gpu {

void HostCopyEngine::copy(void* to, const void* from, std::size_t bytes, Done done) {
  workers_.post([to, from, bytes, done = std::move(done)] {
    std::memcpy(to, from, bytes);
    done(Status::ok());
  });
}

Status encode_on_host(void* to, const float* from, std::size_t count, quant::Codec codec,
                      std::size_t block) {
  auto bytes = quant::encoded_size(count, codec, block);
  if (!bytes) return bytes.status();
  return quant::encode({from, count}, {static_cast<std::byte*>(to), *bytes}, codec, block);
}

Status decode_on_host(void* to, const std::byte* from, std::size_t count, quant::Codec codec,
                      std::size_t block) {
  auto bytes = quant::encoded_size(count, codec, block);
  if (!bytes) return bytes.status();
  return quant::decode({from, *bytes}, {static_cast<float*>(to), count}, codec, block);
}

void HostCopyEngine::encode_copy(void* to, const float* from, std::size_t count, quant::Codec codec,
                                 std::size_t block, Done done) {
  workers_.post(
      [=, done = std::move(done)] { done(encode_on_host(to, from, count, codec, block)); });
}

void HostCopyEngine::decode_copy(void* to, const std::byte* from, std::size_t count,
                                 quant::Codec codec, std::size_t block, Done done) {
  workers_.post(
      [=, done = std::move(done)] { done(decode_on_host(to, from, count, codec, block)); });
}

}  // namespace longhaul::gpu
