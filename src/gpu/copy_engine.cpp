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

void HostCopyEngine::encode_copy(void* to, const float* from, std::size_t count, quant::Codec codec,
                                 std::size_t block, Done done) {
  auto bytes = quant::encoded_size(count, codec, block);
  if (!bytes) return done(bytes.status());
  workers_.post([to, from, count, codec, block, bytes = *bytes, done = std::move(done)] {
    done(quant::encode({from, count}, {static_cast<std::byte*>(to), bytes}, codec, block));
  });
}

void HostCopyEngine::decode_copy(void* to, const std::byte* from, std::size_t count,
                                 quant::Codec codec, std::size_t block, Done done) {
  auto bytes = quant::encoded_size(count, codec, block);
  if (!bytes) return done(bytes.status());
  workers_.post([to, from, count, codec, block, bytes = *bytes, done = std::move(done)] {
    done(quant::decode({from, bytes}, {static_cast<float*>(to), count}, codec, block));
  });
}

}  // namespace longhaul::gpu
