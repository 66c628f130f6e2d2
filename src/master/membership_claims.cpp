// Membership: members' claims that a link to another member is unreachable (LINKS_READY) or lost
// (REPORT_PEER_LOST), and how the master weighs them (membership.hpp). One member's word keeps a
// pair apart but never evicts the accused on its own: a claim is believed when the accused makes
// it too (a broken link fails at both ends), and a claimer nobody confirms is the one removed.
// Also a member's request to abort its group's collectives (ABORT_REQUEST: its own timed out),
// which needs no confirmation: waiting in update_topology aborts them as well.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.hpp"
#include "master/membership.hpp"

namespace longhaul::master {

Status Membership::on_links_ready(PeerId id, uint64_t epoch,
                                  const std::vector<PeerId>& unreachable) {
  if (!round_ || epoch != round_->epoch) {
    // An answer to a proposal that a newer one replaced; the peer will answer that one too.
    if (epoch <= last_epoch_) return Status::ok();
    return protocol_error(fmt::format("LINKS_READY for epoch {} which was never proposed", epoch));
  }
  if (!round_->participants.contains(id))
    return protocol_error(fmt::format("LINKS_READY for epoch {} from a peer not in it", epoch));
  if (round_->ready.contains(id))
    return protocol_error(fmt::format("second LINKS_READY for epoch {}", epoch));
  const Member& me = members_.at(id);
  for (PeerId other : unreachable)
    if (other != id && round_->participants.contains(other) && !may_claim(me, other, round_->rings))
      return protocol_error(fmt::format(
          "LINKS_READY for epoch {} names peer {} unreachable, which is not its ring neighbour "
          "(it does not link as a full mesh)",
          epoch, other));
  round_->ready.insert(id);
  for (PeerId other : unreachable) {
    if (other == id || !round_->participants.contains(other)) continue;
    round_->unreachable[id].insert(other);
    record_claim(id, other);
    round_->new_unreachable = true;
    if (neighbours_in_round(id, other)) {
      log::warn("master", "epoch {}: peer {} cannot reach peer {}; the next ring keeps them apart",
                epoch, id, other);
    } else {
      log::warn("master", "epoch {}: peer {} cannot reach peer {}, which its full mesh needs",
                epoch, id, other);
      unlinkable_.insert(make_peer_pair(id, other));
    }
  }
  if (round_->ready.size() < round_->participants.size()) {
    if (!round_->half_ready && 2 * round_->ready.size() >= round_->participants.size()) {
      round_->half_ready = true;
      out_.round_half_ready(epoch);
    }
    return Status::ok();
  }
  judge_round_claims();
  if (!round_) {
    // A claimer was removed: the proposal named it.
    maybe_start_round();
  } else if (round_->new_unreachable) {
    round_.reset();
    start_round();
  } else {
    commit();
    return Status::ok();
  }
  sync_pending_flags();
  return Status::ok();
}

Status Membership::on_peer_lost(PeerId reporter, uint64_t epoch, PeerId lost,
                                const std::string& reason) {
  if (epoch != committed_epoch_ || round_)
    return Status::ok();  // about links a newer proposal replaces
  auto rep = members_.find(reporter);
  if (rep == members_.end() || rep->second.state != State::kActive)
    return protocol_error("REPORT_PEER_LOST before being admitted");
  if (!members_.contains(lost) || lost == reporter) return Status::ok();  // already gone
  if (!may_claim(rep->second, lost, rings_))
    return protocol_error(fmt::format(
        "REPORT_PEER_LOST names peer {}, which is not its ring neighbour in epoch {} (it does not "
        "link as a full mesh)",
        lost, epoch));
  record_claim(reporter, lost);
  loss_claims_.push_back({reporter, lost});
  ring_broken_ = true;
  // One report per member and epoch aborts its group: its collectives stop at the first, and a
  // member repeating itself must not flood the others with aborts.
  if (rep->second.loss_reported_in != epoch) {
    rep->second.loss_reported_in = epoch;
    log::warn("master", "epoch {}: peer {} lost its link to peer {}: {}", epoch, reporter, lost,
              reason);
    abort_group(rep->second.group, LH_ERR_PEER_LOST,
                fmt::format("peer {} lost its link to peer {}: {}", reporter, lost, reason));
  }
  maybe_start_round();
  sync_pending_flags();
  return Status::ok();
}

Status Membership::on_abort_request(PeerId id, uint64_t epoch, const std::string& reason) {
  auto it = members_.find(id);
  if (it == members_.end() || it->second.state != State::kActive)
    return protocol_error("ABORT_REQUEST before being admitted");
  Member& m = it->second;
  if (epoch != committed_epoch_ || round_ || m.abort_requested_in == epoch) return Status::ok();
  m.abort_requested_in = epoch;
  log::info("master", "epoch {}: peer {} gave up on a collective: {}", epoch, id, reason);
  abort_group(m.group, LH_ERR_ABORTED,
              fmt::format("peer {} gave up on a collective: {}", id, reason));
  maybe_start_round();
  sync_pending_flags();
  return Status::ok();
}

bool Membership::may_claim(const Member& claimer, PeerId accused,
                           const std::map<uint32_t, std::vector<PeerId>>& rings) const {
  auto other = members_.find(accused);
  if (other == members_.end() || other->second.group != claimer.group) return false;
  if (claimer.full_mesh) return true;
  auto ring = rings.find(claimer.group);
  if (ring == rings.end()) return false;
  const std::vector<PeerId>& order = ring->second;
  const auto a = std::find(order.begin(), order.end(), claimer.id);
  const auto b = std::find(order.begin(), order.end(), accused);
  if (a == order.end() || b == order.end()) return false;
  const auto n = static_cast<std::ptrdiff_t>(order.size());
  const auto gap = ((a - b) % n + n) % n;
  return gap == 1 || gap == n - 1;
}

void Membership::record_claim(PeerId claimer, PeerId accused) {
  const PeerPair pair = make_peer_pair(claimer, accused);
  banned_.insert(pair);
  claims_[pair].insert(claimer);
}

size_t Membership::contradicted_claims(PeerId id) const {
  auto it = contradicted_.find(id);
  return it == contradicted_.end() ? 0 : it->second.size();
}

bool Membership::claim_counts(PeerId claimer, PeerId accused) const {
  auto c = members_.find(claimer);
  auto a = members_.find(accused);
  if (c == members_.end() || a == members_.end()) return true;
  return c->second.linked || a->second.state != State::kPending ||
         a->second.reached_by_master != true;
}

void Membership::note_reached(PeerId id, bool reached) {
  auto it = members_.find(id);
  if (it == members_.end()) return;
  it->second.reached_by_master = reached;
  if (!reached)
    log::info("master", "peer {}: its data address {}:{} did not answer the master's probe", id,
              it->second.host, it->second.port);
}

void Membership::judge_round_claims() {
  std::vector<PeerId> conflicting;
  for (const auto& [claimer, accused_set] : round_->unreachable)
    for (PeerId accused : accused_set) {
      if (!claim_counts(claimer, accused)) {
        // It never completed a link of its own and names a newcomer the master reached: the
        // newcomer's counter-claim (nobody came) is the one believed, and this claimer goes
        // before it (choose_eviction puts contradicted claimers first).
        log::warn("master",
                  "peer {} names newcomer {} unreachable, but has completed no link of its own "
                  "and the master reached {}: its claim does not count",
                  claimer, accused, accused);
        contradicted_[claimer].insert(accused);
        continue;
      }
      auto said = round_->unreachable.find(accused);
      const bool confirmed = said != round_->unreachable.end() && said->second.contains(claimer);
      if (confirmed) continue;
      contradicted_[claimer].insert(accused);  // it answered, and named the claimer reachable
      if (count_unconfirmed(claimer, accused)) conflicting.push_back(claimer);
    }
  evict_conflicting(conflicting);
}

void Membership::judge_loss_claims() {
  std::vector<PeerId> conflicting;
  for (const Claim& c : loss_claims_) {
    auto claimers = claims_.find(make_peer_pair(c.claimer, c.accused));
    const bool confirmed = claimers != claims_.end() && claimers->second.contains(c.accused);
    if (confirmed) continue;
    contradicted_[c.claimer].insert(c.accused);  // it came to update_topology reporting nothing
    if (count_unconfirmed(c.claimer, c.accused)) conflicting.push_back(c.claimer);
  }
  loss_claims_.clear();
  evict_conflicting(conflicting);
}

void Membership::evict_conflicting(const std::vector<PeerId>& ids) {
  for (PeerId id : ids) {
    if (!members_.contains(id)) continue;  // named twice
    std::set<PeerId> accused;
    for (const auto& [epoch, other] : members_.at(id).unconfirmed) accused.insert(other);
    const Status why = peer_lost(fmt::format(
        "its claims that its links to peers {} failed were confirmed by none of them: removed as "
        "the member in conflict with the others",
        fmt::join(accused, ", ")));
    out_.misbehaved(id, why.message(), /*lied=*/true);
    evict(id, why);
  }
}

bool Membership::count_unconfirmed(PeerId claimer, PeerId accused) {
  auto it = members_.find(claimer);
  if (it == members_.end()) return false;
  auto& unconfirmed = it->second.unconfirmed;
  const uint64_t now = last_epoch_;
  std::erase_if(unconfirmed,
                [now](const auto& entry) { return entry.first + kClaimWindowEpochs < now; });
  unconfirmed.emplace_back(now, accused);
  std::set<PeerId> distinct;
  for (const auto& [epoch, other] : unconfirmed) distinct.insert(other);
  log::warn("master", "peer {}'s claim about peer {} is unconfirmed ({} peers in {} epochs)",
            claimer, accused, distinct.size(), kClaimWindowEpochs);
  return distinct.size() >= kMaxUnconfirmedClaims;
}

}  // namespace longhaul::master
