// One fragment's round on the network: its pseudo-gradient's all-reduce (or, with the sparse
// codec, the sparse all-gather of the members' encodings) and the masks' (the contribution masks
// of contribution.hpp, then the overlap reports of overlap.hpp), launched together and settled
// together.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "collective/allreduce.hpp"
#include "collective/sparse_allgather.hpp"
#include "common/status.hpp"
#include "peer/communicator.hpp"
#include "sync/overlap.hpp"

namespace longhaul::sync {

struct Round {
  uint32_t fragment = 0;
  uint64_t number = 0;
  std::span<float> delta;      // the staging buffer, fragment-sized; the sum once done
  std::vector<float> masks;    // 2 + kOverlapSlots floats per ring position; the sum once done
  size_t members = 0;          // ring positions the masks were formed for
  std::vector<uint64_t> ring;  // peer ids by ring position at launch
  std::shared_ptr<collective::AllReduceOp> delta_op, mask_op;
  // The sparse codec: the members' encodings' all-gather in place of delta_op, and whether its
  // contributions' step was started (start_data: once the sizes are known, before the engine
  // starts any other collective). `encoded_bytes`: this member's encoding.
  std::shared_ptr<collective::SparseAllGather> gather;
  bool data_started = false;
  uint64_t encoded_bytes = 0;
  Status launch_failure;
  std::chrono::steady_clock::time_point launched_at;
  // The overlap: τ it was launched with (the cycle's), the step that applies it, and when its
  // result was ready here (overlap.hpp). `pending_at`: the last time the engine saw it still
  // running (a poll at the start of each step), so a result first seen at a poll is dated midway
  // between that poll and the one before, and a result waited for is dated when the wait ended.
  uint32_t delay = 0;
  uint64_t apply_step = 0;
  OverlapReport report;  // what this peer reports in it (about the round it finished before)
  std::chrono::steady_clock::time_point pending_at, ready_at;
  bool ready = false;
  uint32_t attempts = 0;
  bool late = false;
  // Settled with the group ahead of its apply step (a checkpoint was written meanwhile, or it was
  // read from one): `decided_apply` is the group's decision.
  bool settled = false;
  bool decided_apply = false;
  peer::TrafficTotals traffic_at_launch;  // the communicator's counters at the first launch
};

}  // namespace longhaul::sync
