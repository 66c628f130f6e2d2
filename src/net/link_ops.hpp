// The link's bookkeeping types (link.hpp declares them): a send or receive in progress, a frame
// waiting for a connection's writer, and the completions collected under the lock. Shared by the
// link's operations (link.cpp) and its connections' I/O loops (link_io.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "net/link.hpp"

namespace longhaul::net {

struct Link::SendOp {
  uint64_t id = 0;
  std::span<const std::byte> data;
  Completion done;
  uint64_t next_offset = 0;  // first byte not yet handed to a connection
  bool all_assigned = false;
  int writes_in_flight = 0;
  uint64_t written = 0;
  Status status;  // non-OK once cancelled or failed
  bool finished = false;
};

struct Link::RecvOp {
  uint64_t id = 0;
  std::span<std::byte> dst;
  Completion done;
  uint64_t received = 0;
  bool any_segment = false;  // a zero-byte op completes on its single empty segment
  int reads_in_flight = 0;
  Status status;
  bool finished = false;
};

struct Link::WriteItem {
  FrameHeader header;
  std::span<const std::byte> payload;
  std::shared_ptr<SendOp> op;    // DATA segments
  std::vector<std::byte> owned;  // other frames own their payload
  Completion done;
};

// Completions collected under the lock and run after it is released, so a completion may call
// back into the link.
struct Link::Pending {
  std::vector<std::pair<Completion, Status>> calls;
  void add(Completion c, Status s) {
    if (c) calls.emplace_back(std::move(c), std::move(s));
  }
  ~Pending() {
    for (auto& [c, s] : calls) c(s);
  }
};

}  // namespace longhaul::net
