// The lab's data path: reads packets from every site's TUN device, passes each through the model
// of its path (loss, bottleneck, delay, jitter, reordering) and writes it to the destination
// site's device when its time comes. Single-threaded; the caller's event loop calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <span>
#include <vector>

#include "wanlab/lab.hpp"
#include "wanlab/path_model.hpp"

namespace longhaul::wanlab {

struct ForwarderCounters {
  uint64_t frames_read = 0;     // reads from the TUN devices (a super-packet is one)
  uint64_t frames_written = 0;  // writes to them
  uint64_t bytes_written = 0;
  uint64_t unroutable = 0;    // not IPv4 or not to a site of the lab
  uint64_t overflow = 0;      // dropped because kMaxQueuedBytes were waiting already
  uint64_t write_errors = 0;  // the destination device refused the frame
};

class Forwarder {
 public:
  Forwarder(Lab& lab, const LabSpec& spec);

  // Reads what site `index`'s device has (up to a batch) and queues it. Returns false when the
  // device failed for good (the lab must stop).
  bool read_site(size_t index, int64_t now_ns);
  // Writes every queued frame whose time has come.
  void deliver_due(int64_t now_ns);
  // When the earliest queued frame is due; nullopt when nothing waits.
  std::optional<int64_t> next_due() const;

  PathModel& path(size_t from, size_t to) { return paths_[from * sites_ + to]; }
  const ForwarderCounters& counters() const { return counters_; }
  uint64_t queued_bytes() const { return queued_bytes_; }

 private:
  struct Pending {
    int64_t due;
    uint64_t seq;  // ties keep arrival order
    size_t to;
    std::vector<std::byte> frame;
    bool operator>(const Pending& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };
  void route(size_t from, std::span<const std::byte> frame, int64_t now_ns);
  void enqueue(size_t to, PathModel& path, std::vector<std::byte> frame, int64_t now_ns);

  Lab& lab_;
  size_t sites_;
  std::vector<PathModel> paths_;  // [from * sites + to]
  std::priority_queue<Pending, std::vector<Pending>, std::greater<>> queue_;
  uint64_t seq_ = 0;
  uint64_t queued_bytes_ = 0;
  std::vector<std::byte> scratch_;
  ForwarderCounters counters_;
};

}  // namespace longhaul::wanlab
