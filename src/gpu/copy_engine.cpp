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

}  // namespace longhaul::gpu
