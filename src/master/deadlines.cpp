// The master's round deadlines and what it remembers of members that missed them (server.hpp,
// penalties.hpp): the arbiters' phases are checked with every heartbeat tick, a reconfiguration
// round has its own timer, and an eviction for misbehaving starts a back-off for the member's
// identity.
#include <string_view>

#include <fmt/format.h>

#include "common/log.hpp"
#include "master/server.hpp"

namespace longhaul::master {

void MasterServer::check_round_deadlines(Clock::time_point now) {
  auto late = state_.expire(now, options_.round_timeout);
  auto silent = batch_.expire(now, options_.round_timeout);
  late.insert(late.end(), silent.begin(), silent.end());
  for (const auto& [id, why] : late) membership_.expel(id, why);
  check_gather_deadline(now);
}

void MasterServer::check_gather_deadline(Clock::time_point now) {
  if (!membership_.gathering()) {
    gathering_since_.reset();
    return;
  }
  if (!gathering_since_) gathering_since_ = now;
  if (now - *gathering_since_ < options_.gather_timeout) return;
  gathering_since_.reset();
  for (PeerId id : membership_.stragglers())
    membership_.expel(id, timeout_error(fmt::format(
                              "did not come to update_topology within {} ms of the others, who "
                              "waited for it to reconfigure",
                              options_.gather_timeout.count())));
}

void MasterServer::arm_round_timer(uint64_t epoch, Clock::time_point deadline) {
  round_deadline_ = deadline;
  round_timer_.expires_at(deadline);
  round_timer_.async_wait([weak = weak_from_this(), epoch](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->stopped_) return;
    self->membership_.on_round_timeout(epoch);
  });
}

void MasterServer::round_half_ready(uint64_t epoch) {
  const auto now = Clock::now();
  const auto grace =
      std::max<Clock::duration>(options_.topology_grace, 4 * (now - round_started_at_));
  if (now + grace >= round_deadline_) return;
  log::debug("master", "epoch {}: half the participants are linked; the rest have {} ms", epoch,
             std::chrono::duration_cast<std::chrono::milliseconds>(grace).count());
  arm_round_timer(epoch, now + grace);
}

void MasterServer::misbehaved(PeerId who, const std::string& what, bool lied) {
  auto it = membership_.members().find(who);
  if (it == membership_.members().end()) return;
  const Membership::Member& m = it->second;
  const Node* node = membership_.nodes().node_of(who);
  const std::string identity = Penalties::identity(m.host, m.port, node ? node->name : "");
  const auto now = Clock::now();
  const auto backoff = penalties_.record(identity, now);
  log::warn("master",
            "peer {} ({}) misbehaved: {}; its registrations are refused for {} ms "
            "(offence {})",
            who, identity, what, backoff.count(), penalties_.offences(identity));
  const std::string source = source_of(who);
  const bool repeatable = lied || m.state == Membership::State::kPending;
  if (!repeatable || source.empty()) return;
  const std::string address = Penalties::address_key(source);
  const auto address_backoff = penalties_.record(address, now, Penalties::kFreeAddressOffences);
  if (address_backoff.count() > 0)
    log::warn("master",
              "{}: {} failed admissions or false claims; every registration from it is refused "
              "for {} ms",
              address, penalties_.offences(address), address_backoff.count());
}

std::string MasterServer::source_of(PeerId who) const {
  auto conn = by_peer_.find(who);
  if (conn == by_peer_.end()) return {};
  auto session = sessions_.find(conn->second);
  if (session == sessions_.end() || !session->second.link) return {};
  auto host = seen_from(session->second);
  return host ? *host : std::string();
}

Status MasterServer::check_backoff(const std::string& host, uint16_t port, const std::string& node,
                                   const std::string& source) const {
  const auto now = Clock::now();
  // A registration is refused while either its identity or its source address serves a ban.
  const auto refused = [&](const std::string& key, std::string_view earned_by) {
    const auto left = penalties_.refused_for(key, now);
    if (left.count() <= 0) return Status::ok();
    return peer_lost(fmt::format(
        "registrations from {} are refused for {} ms more: {} {} time(s) (the master's log says "
        "which)",
        key, left.count(), earned_by, penalties_.offences(key)));
  };
  LH_RETURN_IF_ERROR(refused(Penalties::identity(host, port, node),
                             "a member with this address was evicted for misbehaving (missed "
                             "round deadlines or link claims nobody confirmed)"));
  return refused(Penalties::address_key(source),
                 "members registering from it, whatever data port they named, failed their "
                 "admission or made claims nobody confirmed");
}

}  // namespace longhaul::master
