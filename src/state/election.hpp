// The master's arbitration of a state sync: pure logic from the peers' reports to each peer's
// plan. It sees hashes only, never tensor data.
//
// 1. Revision. Voters are the peers that are not receive-only. The group's revision G is the one
//    the master recorded at the group's last completed sync when some voter still reports it;
//    otherwise the revision most voters report (a tie goes to the higher). A voter above G is
//    refused ("ahead of the group"); a send-only peer below G is refused (it would have to be
//    overwritten). Every peer that succeeds ends at G + 1.
// 2. Schema. The reference tensor list (names, types, sizes) is the one most voters at G report
//    (a tie goes to the list of the lowest peer id). Any peer whose list differs is refused with
//    LH_ERR_STATE_MISMATCH naming the first tensor that differs.
// 3. Content. Per tensor, the hash most voters at G hold wins (a tie goes to the content of the
//    lowest peer id). A send-only peer that differs is refused, naming the tensor. Every other
//    peer that differs fetches the blocks whose hashes differ, from every peer (not refused)
//    that holds the elected content of that tensor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "wire/control_messages.hpp"

namespace longhaul::state {

using PeerId = uint64_t;

struct Participant {
  wire::StateReportMsg report;
  std::string host;  // where its data listener is reachable
  uint16_t port = 0;
};

struct Election {
  uint64_t revision = 0;                       // the group's revision before this sync (G)
  std::map<PeerId, wire::StatePlanMsg> plans;  // one per participant
};

// `last_revision`: the revision the master recorded at the group's last completed sync, if any.
// `epoch` is copied into every plan. Deterministic: the same reports give the same plans.
Election elect(const std::map<PeerId, Participant>& participants,
               std::optional<uint64_t> last_revision, uint64_t epoch);

}  // namespace longhaul::state

namespace longhaul::state {
// Checks what the wire codec cannot: the block size is this build's, and every tensor's block
// hashes and bitmap match its type and size. A failure is a protocol violation.
Status validate_report(const wire::StateReportMsg& report);
}  // namespace longhaul::state
