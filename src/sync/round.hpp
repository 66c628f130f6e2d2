// One fragment's round on the network: its pseudo-gradient's all-reduce and the contribution
// masks' (contribution.hpp), launched together and settled together.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "collective/allreduce.hpp"
#include "common/status.hpp"
#include "peer/communicator.hpp"

namespace longhaul::sync {

struct Round {
  uint32_t fragment = 0;
  uint64_t number = 0;
  std::span<float> delta;      // the staging buffer, fragment-sized; the sum once done
  std::vector<float> masks;    // one code per ring position; the sum once done
  std::vector<uint64_t> ring;  // peer ids by ring position at launch
  std::shared_ptr<collective::AllReduceOp> delta_op, mask_op;
  Status launch_failure;
  std::chrono::steady_clock::time_point launched_at;
  uint32_t attempts = 0;
  bool late = false;
  // Settled with the group ahead of its apply step (a checkpoint was written meanwhile, or it was
  // read from one): `decided_apply` is the group's decision.
  bool settled = false;
  bool decided_apply = false;
  peer::TrafficTotals traffic_at_launch;  // the communicator's counters at the first launch
};

}  // namespace longhaul::sync
