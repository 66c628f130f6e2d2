// N members in one process, every pair joined by a real loopback link: the ring views a
// communicator would hand to the collective engine.
#pragma once

#include <future>
#include <memory>
#include <vector>

#include "collective/ring_view.hpp"
#include "net/endpoint.hpp"

namespace longhaul::collective::testing {

class LoopbackGroup {
 public:
  LoopbackGroup(net::IoRuntime& io, size_t members, uint16_t connections = 2, uint64_t epoch = 1);
  ~LoopbackGroup();
  RingView view(size_t rank) const { return views_[rank]; }
  size_t size() const { return views_.size(); }
  // Closes every link of member `rank`, as if its process died.
  void kill(size_t rank);

 private:
  std::vector<std::shared_ptr<net::Listener>> listeners_;
  std::vector<RingView> views_;
};

}  // namespace longhaul::collective::testing
