// The data port as the layers above the peer see it: start a collective over the committed
// epoch's ring, and count the bytes. Communicator implements it over its mesh's links; tests
// implement it over in-process links (tests/support/fake_group.hpp).
#pragma once

#include <cstdint>
#include <memory>

#include "collective/allreduce.hpp"
#include "collective/buffer_pool.hpp"
#include "collective/gather.hpp"
#include "collective/ring_view.hpp"
#include "common/status.hpp"

namespace longhaul::peer {

// Bytes a member's links have written (sent) and read (received) since it was created, frame
// headers included, by kind of link: data (the group's collectives), control (the master), state
// (the state sync's block transfers). Each field only grows.
struct TrafficTotals {
  uint64_t data_sent = 0;
  uint64_t data_received = 0;
  uint64_t control_sent = 0;
  uint64_t control_received = 0;
  uint64_t state_sent = 0;
  uint64_t state_received = 0;
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  // The committed epoch's ring as the collectives see it. Thread-safe.
  virtual collective::RingView ring_view() const = 0;
  // Starts an all-reduce over the committed epoch's ring (collective::AllReduceSpec); fails at once
  // with the member's failure when it is unusable.
  virtual Result<std::shared_ptr<collective::AllReduceOp>> allreduce(
      const collective::AllReduceSpec& spec) = 0;
  // Starts an all-gather, a broadcast or a barrier (collective::GatherSpec) likewise.
  virtual Result<std::shared_ptr<collective::GatherOp>> gather(
      const collective::GatherSpec& spec) = 0;
  // The scratch the operations share (an input guard outside an operation takes its copy here).
  virtual collective::BufferPool& buffers() = 0;
  // A snapshot of the traffic counters (fields read one after another). Thread-safe.
  virtual TrafficTotals traffic() const = 0;
};

}  // namespace longhaul::peer
