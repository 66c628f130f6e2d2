// The GPU tests' two peers: longhaul::testing::CommPair (tests/support/comm_pair.hpp), skipped
// without a CUDA device, with `gpu()` the peer whose buffers live on the device and `cpu()` the
// peer whose buffers stay in host memory.
#pragma once

#include "comm_pair.hpp"
#include "tests/unit/gpu/device_buffer.hpp"

namespace longhaul::gpu::testing {

class TwoPeers : public longhaul::testing::CommPair {
 protected:
  void SetUp() override {
    LH_SKIP_WITHOUT_CUDA();
    CommPair::SetUp();
  }
  longhaul::Communicator& gpu() const { return *a_; }
  longhaul::Communicator& cpu() const { return *b_; }
};

}  // namespace longhaul::gpu::testing
