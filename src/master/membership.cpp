#include "master/membership.hpp"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.hpp"
#include "master/topology_delta.hpp"

namespace longhaul::master {

void Membership::add_pending(PeerId id, uint32_t group, std::string host, uint16_t port,
                             const NodeClaim& node, bool full_mesh) {
  Member m;
  m.id = id;
  m.group = group;
  m.host = std::move(host);
  m.port = port;
  m.full_mesh = full_mesh;
  log::info("master", "peer {} joined group {} (data address {}:{}); waiting for admission", id,
            group, m.host, port);
  members_.emplace(id, std::move(m));
  pending_.insert(id);
  if (const Node* n = nodes_.add(id, node)) note_rail_registered(*n);
  maybe_start_round();
  sync_pending_flags();
}

bool Membership::reconfiguration_needed() const {
  if (ring_broken_) return true;
  return std::any_of(pending_.begin(), pending_.end(),
                     [this](PeerId id) { return admissible(id); });
}

bool Membership::pending_flag() const {
  return ring_broken_ || (!joiners_held_ && reconfiguration_needed());
}

void Membership::release_held_joiners() {
  if (!joiners_held_) return;
  joiners_held_ = false;
  sync_pending_flags();
}

size_t Membership::group_active(uint32_t group) const {
  auto it = counts_.find(group);
  return it == counts_.end() ? 0 : it->second.active;
}

size_t Membership::group_waiting(uint32_t group) const {
  auto it = counts_.find(group);
  return it == counts_.end() ? 0 : it->second.waiting;
}

void Membership::set_waiting(Member& m, bool waiting) {
  if (m.waiting == waiting) return;
  m.waiting = waiting;
  GroupCount& c = counts_[m.group];
  c.waiting = waiting ? c.waiting + 1 : c.waiting - 1;
  waiting_total_ = waiting ? waiting_total_ + 1 : waiting_total_ - 1;
  if (!waiting) flag_pushed_.reset();  // eligible for the flag again
}

void Membership::count_active(const Member& m, int change) {
  GroupCount& c = counts_[m.group];
  c.active = change > 0 ? c.active + 1 : c.active - 1;
  active_total_ = change > 0 ? active_total_ + 1 : active_total_ - 1;
  if (c.active == 0) counts_.erase(m.group);
}

Status Membership::on_update_topology(PeerId id, uint64_t epoch, bool admit_joiners) {
  auto it = members_.find(id);
  if (it == members_.end()) return internal_error(fmt::format("unknown peer {}", id));
  Member& m = it->second;
  if (m.state != State::kActive) return protocol_error("UPDATE_TOPOLOGY before being admitted");
  if (m.waiting) return protocol_error("UPDATE_TOPOLOGY while one is already in progress");
  if (epoch != m.epoch)
    return protocol_error(
        fmt::format("UPDATE_TOPOLOGY for epoch {} but the peer is in epoch {}", epoch, m.epoch));
  if (leave_departing_node(id)) return Status::ok();
  if (!reconfiguration_needed() && !recovering_) {
    out_.send(id, wire::TopologyUnchangedMsg{m.epoch});
    return Status::ok();
  }
  // The first member of its group to wait runs no collective of this epoch any more, so the
  // group's collectives in flight (and those the others are about to start) cannot complete. End
  // them: a member that has not seen the peers-pending flag yet (it reaches each peer at its own
  // time) then fails fast and comes to update_topology too, instead of waiting for this one
  // forever.
  const uint32_t group = m.group;
  const bool first_to_wait = group_waiting(group) == 0;
  const bool others_busy = group_active(group) - group_waiting(group) > 1;  // besides this one
  set_waiting(m, true);
  m.admit_joiners = admit_joiners;
  if (first_to_wait && others_busy) {
    abort_group(group, LH_ERR_ABORTED, fmt::format("peer {} is waiting for a reconfiguration", id));
    out_.group_reconfiguring(group);
  }
  maybe_start_round();
  return Status::ok();
}

bool Membership::neighbours_in_round(PeerId a, PeerId b) const {
  for (const auto& [group, order] : round_->rings) {
    const auto ia = std::find(order.begin(), order.end(), a);
    const auto ib = std::find(order.begin(), order.end(), b);
    if (ia == order.end() || ib == order.end()) continue;
    const size_t n = order.size();
    const size_t gap = static_cast<size_t>((ia - ib + static_cast<std::ptrdiff_t>(n)) %
                                           static_cast<std::ptrdiff_t>(n));
    return gap == 1 || gap == n - 1;
  }
  return false;
}

void Membership::on_round_timeout(uint64_t epoch) {
  if (!round_ || round_->epoch != epoch) return;
  std::vector<PeerId> silent;
  for (PeerId id : round_->participants)
    if (!round_->ready.contains(id)) silent.push_back(id);
  round_.reset();
  ring_broken_ = true;
  for (PeerId id : silent) {
    const Status why =
        timeout_error(fmt::format("did not set up its links for epoch {} in time", epoch));
    out_.misbehaved(id, why.message());
    evict(id, why);
  }
  maybe_start_round();
  sync_pending_flags();
}

void Membership::drop_peer(PeerId id, const std::string& reason, bool graceful) {
  if (!members_.contains(id)) return;
  forget(id, reason, graceful);
  maybe_start_round();
  sync_pending_flags();
}

void Membership::forget(PeerId id, const std::string& reason, bool graceful) {
  auto it = members_.find(id);
  if (it == members_.end()) return;
  set_waiting(it->second, false);
  if (it->second.state == State::kActive) count_active(it->second, -1);
  pending_.erase(id);
  const Member m = it->second;
  members_.erase(it);
  log::info("master", "peer {} left group {}: {}", id, m.group, reason);
  const auto involves = [id](const PeerPair& p) { return p.first == id || p.second == id; };
  std::erase_if(banned_, involves);
  std::erase_if(unlinkable_, involves);
  std::erase_if(claims_, [&](const auto& kv) { return involves(kv.first); });
  contradicted_.erase(id);
  for (auto& [claimer, accused] : contradicted_) accused.erase(id);
  std::erase_if(loss_claims_, [&](const Claim& c) { return c.claimer == id || c.accused == id; });
  if (m.state == State::kActive) {
    ring_broken_ = true;
    if (graceful)
      out_.group_epoch_failed(m.group);  // no ABORT (see drop_peer), but it runs no more batches
    else
      abort_group(m.group, LH_ERR_PEER_LOST, fmt::format("peer {} left: {}", id, reason));
  }
  if (round_ && round_->participants.contains(id)) {
    // Every participant has a proposal that names the lost peer; replace it.
    round_.reset();
    ring_broken_ = true;
  }
  out_.peer_forgotten(id);
  out_.peer_left(id, m.group, reason, graceful);
  follow_node(id, reason, graceful);  // the node goes as a whole
}

void Membership::evict(PeerId id, const Status& why) {
  forget(id, fmt::format("evicted: {}", why.message()));
  out_.disconnect(id, why);
}

void Membership::expel(PeerId id, const Status& why) {
  if (!members_.contains(id)) return;
  out_.misbehaved(id, why.message());
  evict(id, why);
  maybe_start_round();
  sync_pending_flags();
}

void Membership::on_batch_failed() {
  ring_broken_ = true;
  sync_pending_flags();
}

// An aborted epoch runs no more collectives (its batch attempts fail), so its members re-form even
// if the reason for the abort goes away (a joiner that a waiting member came for leaves first).
void Membership::abort_group(uint32_t group, lh_status code, const std::string& reason) {
  ring_broken_ = true;
  std::vector<PeerId> to;
  for (const auto& [id, m] : members_)
    if (m.state == State::kActive && m.group == group) to.push_back(id);
  out_.send_all(to, wire::AbortMsg{committed_epoch_, group, code, reason});
  out_.group_epoch_failed(group);
}

bool Membership::gathering() const {
  return !round_ && !recovering_ && waiting_total_ > 0 && active_total_ != waiting_total_ &&
         reconfiguration_needed();
}

std::vector<PeerId> Membership::stragglers() const {
  std::vector<PeerId> out;
  for (const auto& [id, m] : members_)
    if (m.state == State::kActive && !m.waiting) out.push_back(id);
  return out;
}

void Membership::maybe_start_round() {
  if (round_ || recovering_) return;
  if (!reconfiguration_needed()) {
    // The reason to wait went away (the joiner left before it was admitted).
    if (waiting_total_ == 0) return;
    std::vector<PeerId> to;
    for (auto& [id, m] : members_) {
      if (!m.waiting) continue;
      set_waiting(m, false);
      m.admit_joiners = true;
      to.push_back(id);
    }
    out_.send_all(to, wire::TopologyUnchangedMsg{committed_epoch_});
    return;
  }
  if (active_total_ != waiting_total_) return;  // an active member has not come to wait yet
  judge_loss_claims();  // may evict a member whose claims nobody confirms (it waited too)
  start_round();
}

void Membership::start_round() {
  // A member retrying a batch asked that no joiner be admitted: the new epoch's members must be
  // exactly those that run the retry.
  const bool admit = std::all_of(members_.begin(), members_.end(), [](const auto& kv) {
    return kv.second.state != State::kActive || !kv.second.waiting || kv.second.admit_joiners;
  });
  // Evicting a peer can leave another group without a ring: solve again until none is evicted.
  for (;;) {
    Groups groups;
    for (const auto& [id, m] : members_)
      if ((admit && admissible(id)) || m.state == State::kActive) groups[m.group].push_back(id);
    if (groups.empty()) {
      ring_broken_ = false;
      rings_.clear();
      return;
    }
    Groups rings;
    if (auto eviction = solve_rings(groups, &rings)) {
      evict(eviction->id, peer_lost(eviction->reason));
      round_.reset();
      continue;
    }
    propose(std::move(rings), admit);
    return;
  }
}

std::optional<Membership::Eviction> Membership::solve_rings(const Groups& groups,
                                                            Groups* rings) const {
  for (const auto& [group, ids] : groups) {
    auto ring = solve_ring(ids, banned_);
    // ids = ids: clang 14 cannot capture a structured binding by name.
    const bool mesh_broken =
        std::any_of(unlinkable_.begin(), unlinkable_.end(), [&ids = ids](const PeerPair& p) {
          return std::count(ids.begin(), ids.end(), p.first) &&
                 std::count(ids.begin(), ids.end(), p.second);
        });
    if (ring && !mesh_broken) {
      (*rings)[group] = std::move(*ring);
      continue;
    }
    // No ring keeps every unreachable pair apart, or the group's full mesh misses a pair that no
    // ring can give it: evict one peer of such a pair.
    return choose_eviction(group, ids, ring ? unlinkable_ : banned_, ring.has_value());
  }
  return std::nullopt;
}

std::optional<Membership::Eviction> Membership::choose_eviction(uint32_t group,
                                                                const std::vector<PeerId>& ids,
                                                                const std::set<PeerPair>& blocking,
                                                                bool ring_found) const {
  // A peer whose claims the accused contradicted goes first (one member's word never pushes out
  // the peers it accuses; an accused that never answered contradicts nothing); then a peer not yet
  // admitted before an admitted one (a newcomer with a broken address must not push out the members
  // that worked so far); then the one with the most unreachable neighbours; then the newest.
  std::optional<Eviction> victim;
  std::tuple<size_t, bool, size_t, PeerId> worst{0, false, 0, 0};
  for (PeerId id : ids) {
    std::vector<PeerId> cut;
    for (const auto& p : blocking) {
      if (p.first == id && std::count(ids.begin(), ids.end(), p.second)) cut.push_back(p.second);
      if (p.second == id && std::count(ids.begin(), ids.end(), p.first)) cut.push_back(p.first);
    }
    if (cut.empty()) continue;
    const std::tuple<size_t, bool, size_t, PeerId> score{
        contradicted_claims(id), members_.at(id).state == State::kPending, cut.size(), id};
    if (score < worst) continue;
    worst = score;
    victim = Eviction{
        id, ring_found
                ? fmt::format("the full mesh of group {} needs links this peer cannot make "
                              "(cannot reach peers {})",
                              group, fmt::join(cut, ", "))
                : fmt::format(
                      "no ring of group {} avoids its unreachable links (cannot reach peers {})",
                      group, fmt::join(cut, ", "))};
    if (std::get<0>(score) > 0)
      victim->reason +=
          "; removed rather than the peers it names: its claims were contradicted "
          "or did not count (no completed link of its own)";
  }
  return victim;
}

void Membership::propose(Groups rings, bool admit) {
  Round round;
  round.epoch = ++last_epoch_;
  round.rings = std::move(rings);
  round.admits_joiners = admit;
  wire::TopologyMsg proposal;
  proposal.epoch = round.epoch;
  for (const auto& [id, m] : members_) {
    if (m.state != State::kActive && (!admit || !admissible(id))) continue;
    round.participants.insert(id);
    proposal.members.push_back({id, m.group, m.host, m.port});
  }
  for (const auto& [group, order] : round.rings) proposal.rings.push_back({group, order});
  log::debug("master", "proposing epoch {} to {} peers", round.epoch, round.participants.size());
  round_ = std::move(round);
  // Members of the committed epoch are told only what changes; peers it admits get it all.
  const auto change =
      base_is_shared_ ? topology_delta(committed_epoch_, rings_, proposal) : std::nullopt;
  std::vector<PeerId> to_change, to_whole;
  for (PeerId id : round_->participants)
    (change && members_.at(id).state == State::kActive ? to_change : to_whole).push_back(id);
  if (change) out_.send_all(to_change, *change);
  out_.send_all(to_whole, proposal);
  out_.round_started(round_->epoch);
}

void Membership::commit() {
  committed_epoch_ = round_->epoch;
  base_is_shared_ = true;
  rings_ = std::move(round_->rings);
  const std::set<PeerId> participants = std::move(round_->participants);
  const bool held = !round_->admits_joiners;
  round_.reset();
  ring_broken_ = false;
  std::map<uint32_t, size_t> group_sizes;
  for (PeerId id : participants) ++group_sizes[members_.at(id).group];
  for (PeerId id : participants) {
    Member& m = members_.at(id);
    // A committed round had no unreachable claim: with a neighbour, its links all completed.
    if (group_sizes[m.group] >= 2) m.linked = true;
    if (m.state == State::kPending) {
      m.state = State::kActive;
      count_active(m, +1);
      pending_.erase(id);
    }
    m.epoch = committed_epoch_;
    set_waiting(m, false);
    m.admit_joiners = true;
  }
  joiners_held_ = held && reconfiguration_needed();
  std::string rings;
  for (const auto& [group, order] : rings_)
    rings += fmt::format(" group {}: [{}]", group, fmt::join(order, " "));
  log::info("master", "epoch {}: {} peers in {} group(s);{}", committed_epoch_, participants.size(),
            rings_.size(), rings);
  const bool pending = pending_flag();
  for (PeerId id : participants) members_.at(id).pending_sent = pending;
  flag_pushed_ = pending;  // every active member took part, and now knows the flag
  out_.send_all({participants.begin(), participants.end()},
                wire::EpochCommitMsg{committed_epoch_, op_sequence_, pending});
  maybe_start_round();  // with no active member waiting this does nothing
}

void Membership::sync_pending_flags() {
  const bool pending = pending_flag();
  if (flag_pushed_ == pending) return;  // a wave of joins scans the members once, not per join
  std::vector<PeerId> to;
  for (auto& [id, m] : members_) {
    if (m.state != State::kActive || m.waiting || m.pending_sent == pending) continue;
    m.pending_sent = pending;
    to.push_back(id);
  }
  flag_pushed_ = pending;
  out_.send_all(to, wire::PendingChangedMsg{pending});
}

}  // namespace longhaul::master
