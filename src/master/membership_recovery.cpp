// Membership after a master restart (membership.hpp, "Recovery"): the members of the previous
// master rejoin with their view of the run, and the views most of each group share become the
// run again. The rule is a vote, not trust: one member's report never decides alone.
#include <algorithm>
#include <iterator>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.hpp"
#include "master/membership.hpp"

namespace longhaul::master {
namespace {

// A member's view of its group: the epoch and the ring it is in.
using View = std::pair<uint64_t, std::vector<PeerId>>;

std::string describe(const View& v) {
  return fmt::format("epoch {}, ring [{}]", v.first, fmt::join(v.second, " "));
}

// The view most reports name (a tie goes to the newer epoch, then the smaller ring order).
std::optional<View> most_reported(const std::map<View, size_t>& counts) {
  std::optional<View> best;
  size_t best_count = 0;
  for (const auto& [view, count] : counts)
    if (count > best_count || (count == best_count && best && view.first > best->first)) {
      best = view;
      best_count = count;
    }
  return best;
}

}  // namespace

void Membership::raise_floors(PeerId last_id, uint64_t last_epoch) {
  last_id_ = std::max(last_id_, last_id);
  last_epoch_ = std::max(last_epoch_, last_epoch);
}

Status Membership::add_rejoined(const RejoinReport& r) {
  if (!recovering_)
    return internal_error("a rejoin outside recovery");  // the server checks before calling
  if (members_.contains(r.id) || r.id == 0)
    return Status(LH_ERR_STATE_MISMATCH,
                  fmt::format("peer id {} is already taken in this master's run: rejoin as a new "
                              "peer to resync",
                              r.id));
  LH_RETURN_IF_ERROR(nodes_.check(r.node));
  Member m;
  m.id = r.id;
  m.group = r.group;
  m.host = r.host;
  m.port = r.port;
  m.full_mesh = r.full_mesh;
  m.state = State::kActive;
  m.epoch = r.epoch;
  m.linked = r.ring.size() >= 2;  // it reports links it held before the restart
  count_active(m, +1);
  members_.emplace(r.id, std::move(m));
  nodes_.add(r.id, r.node);
  rejoined_[r.id] = r;
  raise_floors(r.id, std::max(r.epoch, r.proposed_epoch));
  log::info("master", "peer {} of group {} rejoined: it reports epoch {} and ring [{}]", r.id,
            r.group, r.epoch, fmt::join(r.ring, " "));
  return Status::ok();
}

bool Membership::everyone_rejoined() const {
  if (rejoined_.empty()) return false;
  // The members of other groups are known only by number: as many as the newest epoch had.
  uint64_t newest = 0;
  uint32_t world = 0;
  for (const auto& [id, r] : rejoined_) {
    if (r.epoch > newest) world = 0;
    newest = std::max(newest, r.epoch);
    if (r.epoch == newest) world = std::max(world, r.world);
  }
  if (rejoined_.size() < world) return false;
  for (const auto& [id, report] : rejoined_) {
    for (PeerId peer : report.ring)
      if (!rejoined_.contains(peer)) return false;
    if (const Node* node = nodes_.node_of(id); node && !node->complete()) return false;
  }
  return true;
}

std::vector<std::pair<PeerId, std::string>> Membership::conflicting_rejoins() const {
  std::map<uint32_t, std::map<View, size_t>> committed;  // per group: views and their counts
  for (const auto& [id, r] : rejoined_) ++committed[r.group][View{r.epoch, r.ring}];
  std::vector<std::pair<PeerId, std::string>> conflicts;
  for (const auto& [group, counts] : committed) {
    const View majority = *most_reported(counts);
    // A master lost between its EPOCH_COMMITs leaves the group split between the epoch and the
    // proposal that followed it: a member on either side of that split agrees with the majority.
    std::map<View, size_t> next_counts;
    for (const auto& [id, r] : rejoined_)
      if (r.group == group && View{r.epoch, r.ring} == majority && r.proposed_epoch != 0)
        ++next_counts[View{r.proposed_epoch, r.proposed_ring}];
    const std::optional<View> next = most_reported(next_counts);
    const auto agrees = [&](const View& v) { return v == majority || (next && v == *next); };
    for (const auto& [id, r] : rejoined_) {
      if (r.group != group) continue;
      if (agrees(View{r.epoch, r.ring}) ||
          (r.proposed_epoch != 0 && agrees(View{r.proposed_epoch, r.proposed_ring})))
        continue;
      conflicts.emplace_back(
          id, fmt::format("its view of group {} ({}) conflicts with the one most members report "
                          "({}): rejoin as a new peer to resync",
                          group, describe(View{r.epoch, r.ring}), describe(majority)));
    }
  }
  return conflicts;
}

std::vector<std::pair<PeerId, std::string>> Membership::broken_nodes() const {
  std::vector<std::pair<PeerId, std::string>> broken;
  for (const auto& [node_id, node] : nodes_.nodes()) {
    if (node.complete()) continue;
    for (const auto& [rail, peer] : node.members)
      if (members_.contains(peer) && members_.at(peer).state == State::kActive)
        broken.emplace_back(peer, fmt::format("{} did not come back whole after the master "
                                              "restarted ({} of {} rails rejoined)",
                                              node.label(), node.members.size(), node.rails));
  }
  return broken;
}

void Membership::finish_recovery() {
  if (!recovering_) return;
  for (const auto& [id, why] : conflicting_rejoins())
    if (members_.contains(id)) evict(id, Status(LH_ERR_STATE_MISMATCH, why));
  for (const auto& [id, why] : broken_nodes())
    if (members_.contains(id)) evict(id, Status(LH_ERR_NODE_EVICTED, why));
  // The committed rings as the members report them (the status page shows them until the new
  // epoch), and the newest epoch any member is in.
  rings_.clear();
  for (const auto& [id, r] : rejoined_) {
    auto it = members_.find(id);
    if (it == members_.end()) continue;
    committed_epoch_ = std::max(committed_epoch_, r.epoch);
    std::vector<PeerId> ring;
    std::copy_if(r.ring.begin(), r.ring.end(), std::back_inserter(ring),
                 [this](PeerId p) { return members_.contains(p); });
    rings_[r.group] = std::move(ring);
  }
  log::info("master",
            "recovery done: {} of {} rejoined members kept, epoch {}; re-forming the "
            "rings in epoch {} or later",
            std::count_if(rejoined_.begin(), rejoined_.end(),
                          [this](const auto& kv) { return members_.contains(kv.first); }),
            rejoined_.size(), committed_epoch_, last_epoch_ + 1);
  // Every old epoch is over: an operation still in flight in one can only be one that a member
  // refused after losing the master (CollectiveEngine::close_epoch), which no member completes.
  // End it on the members still blocked in it, so that they come to update_topology too.
  for (const auto& [id, m] : members_)
    if (m.state == State::kActive && !m.waiting && rejoined_.contains(id))
      out_.send(id, wire::AbortMsg{m.epoch, m.group, LH_ERR_ABORTED,
                                   "the master restarted: the group re-forms"});
  rejoined_.clear();
  recovering_ = false;
  // Members sit in different epochs and in none this master proposed: re-form every group, with
  // whole proposals (base_is_shared_ stays false until this master commits), and tell every
  // rejoined member the flag.
  ring_broken_ = true;
  flag_pushed_.reset();
  maybe_start_round();
  sync_pending_flags();
}

}  // namespace longhaul::master
