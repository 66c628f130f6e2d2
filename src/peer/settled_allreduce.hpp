// The single blocking all-reduce (lh_allreduce) as one agreed step of the group: its outcome is
// decided by the master, as a batch attempt's is, through the one settle step (settle.hpp,
// docs/collectives.md "One all-reduce, one outcome").
//
// Why: an all-reduce's own outcome is local. The master's pushed abort can reach one member after
// its all-reduce completed and another before, and no exchange on the data plane can make every
// member know the last one's outcome (the two generals). So each member reports its local outcome
// (BATCH_REPORT) and returns what the master decides: OK on a member exactly when OK on every
// member. A member whose own all-reduce succeeded but whose group failed puts its input (and
// residual) back and returns LH_ERR_ABORTED; a member whose own all-reduce failed returns that
// failure. The cost is one round trip to the master per call (docs/collectives.md has the figure).
//
// Reports are numbered per epoch (GroupControl::decide), so they must reach the master in the
// order the all-reduces were started, which is the same on every member (SPMD): a call takes a
// ticket when its all-reduce is numbered and reports only after every earlier ticket's report was
// decided. Several threads may call at once; the batch call and the sync engine's rounds, which
// report on the same counter, must not run meanwhile (as for the batch call itself).
#pragma once

#include <cstdint>
#include <optional>

#include "collective/allreduce.hpp"
#include "common/mutex.hpp"
#include "common/status.hpp"
#include "peer/collectives.hpp"
#include "peer/group.hpp"

namespace longhaul::peer {

class SettledAllReduces {
 public:
  // `group` and `collectives` (one member's) must outlive it.
  SettledAllReduces(GroupControl& group, Collectives& collectives)
      : group_(group), collectives_(collectives) {}

  // Runs one all-reduce of `spec` and settles its outcome with the group. `info` (may be null)
  // gets the all-reduce's figures once it started. Errors before the all-reduce is numbered
  // (invalid arguments, an unusable member) return at once without a report. With
  // spec.restore_input false an in-place failure leaves the buffer unspecified, as for one
  // all-reduce; the residual is always put back.
  Status run(collective::AllReduceSpec spec, std::optional<collective::OpInfo>* info);

 private:
  struct Started {
    uint64_t ticket = 0;
    bool reported = false;  // numbered: the group expects this member's report
    Status local;           // this member's own outcome
  };
  // Starts the all-reduce and takes its ticket in the same step, then waits for it.
  Started start_and_wait(const collective::AllReduceSpec& spec,
                         std::optional<collective::OpInfo>* info);
  // Reports `started` once every earlier ticket's report was decided; whether the group succeeded.
  Result<bool> decide_in_turn(const Started& started);

  GroupControl& group_;
  Collectives& collectives_;
  Mutex start_mu_;  // numbering an all-reduce and taking its ticket happen at once
  uint64_t next_ticket_ GUARDED_BY(start_mu_) = 0;
  Mutex turn_mu_;
  CondVar turn_cv_;
  uint64_t decided_ GUARDED_BY(turn_mu_) = 0;  // tickets below it have been decided
};

}  // namespace longhaul::peer
