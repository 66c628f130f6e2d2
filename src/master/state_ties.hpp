// Who wins a tie in a state sync (issue 50, item 7). state::elect breaks a tie between contents
// held by equally many voters in favour of the lowest peer id, so in a group of two a member that
// joined first could make the other fetch whatever it reported. The master instead remembers, per
// group, the content the group last agreed on (each tensor's digest once a sync completed) and
// breaks ties in favour of the member still holding most of it, then by the lowest id.
//
// It does so without touching the election: the reports are handed to state::elect keyed by their
// tie order (1, 2, ...) and the plans' peer ids are mapped back. Pure logic on the master's strand.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "state/election.hpp"

namespace longhaul::master {

class StateTies {
 public:
  using PeerId = state::PeerId;
  using Digests = std::map<std::string, uint64_t>;  // tensor name -> digest of its block hashes

  // state::elect over `reports`, ties going to the agreed content of `group`. `reports` is
  // re-keyed in place for the call and restored before returning.
  state::Election elect(uint32_t group, std::map<PeerId, state::Participant>& reports,
                        std::optional<uint64_t> last_revision, uint64_t epoch) const;
  // What every member whose plan succeeds holds after the sync `e` planned from `reports`.
  static Digests elected_content(const std::map<PeerId, state::Participant>& reports,
                                 const state::Election& e);
  // The group's sync completed: `content` is what it agreed on.
  void agreed(uint32_t group, Digests content) { agreed_[group] = std::move(content); }

 private:
  // How many of `report`'s tensors hold the content `group` last agreed on.
  size_t agreement(uint32_t group, const wire::StateReportMsg& report) const;

  std::map<uint32_t, Digests> agreed_;
};

}  // namespace longhaul::master
