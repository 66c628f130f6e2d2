// The batch call: several all-reduces as one all-or-nothing step of the group (docs/collectives.md,
// "Batches"), settled with the group (settle.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collective/allreduce_spec.hpp"
#include "peer/collectives.hpp"
#include "peer/group.hpp"

namespace longhaul::peer {

// One all-reduce of a batch: spec.input/output/count as in AllReduceSpec.
struct BatchItem {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
};

// Runs every item with `spec`'s type, op and codec, all in flight at once, all or nothing. After
// each attempt every member reports its outcome to the master, which decides for the whole
// group (OK once every member succeeded; FAILED as soon as one failed or a member is lost, leaves
// or waits in update_topology). On FAILED every member restores its inputs (and residual), calls
// update_topology without admitting joiners, and retries on the new ring, up to max_attempts
// attempts; after the last one the caller re-forms (with joiners) before it tries again. Returns
// OK exactly when every member of the group returns OK, with the results; on any error the
// inputs (and residual) are as they were on entry. One call at a time per member, and nothing
// else runs on its collectives meanwhile.
Status allreduce_batch(GroupControl& group, Collectives& collectives,
                       const std::vector<BatchItem>& items, collective::AllReduceSpec spec,
                       uint32_t max_attempts);

}  // namespace longhaul::peer
