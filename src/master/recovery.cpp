// The master's side of a restart (membership.hpp, "Recovery"; journal.hpp): the network glue that
// takes REJOINs, keeps the recovery window, and keeps ids and epochs above the earlier master's.
#include <fmt/format.h>

#include "common/log.hpp"
#include "master/server.hpp"

namespace longhaul::master {
namespace {

// After a corrupt journal nothing proves which ids the earlier master gave out; ids from here
// on start above the clock's seconds shifted past a million ids per second, which no earlier
// master of this run can have reached.
PeerId id_floor_from_clock() {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return static_cast<PeerId>(seconds) << 20;
}

}  // namespace

Status MasterServer::adopt_journal(std::unique_ptr<Journal> journal, const Journal::Found& found) {
  journal_ = std::move(journal);
  if (!found.existed) {
    log::info("master", "journal {}: a new run", journal_->path());
    return Status::ok();
  }
  if (!found.corrupt.empty()) {
    const PeerId floor = id_floor_from_clock();
    log::error("master",
               "journal {} is unreadable ({}); starting safely: the members' reports rebuild the "
               "run and new peer ids start above {}",
               journal_->path(), found.corrupt, floor);
    membership_.raise_floors(floor, 0);
    LH_RETURN_IF_ERROR(journal_->reserve({floor + Journal::kLease, Journal::kLease}));
  } else {
    log::info("master", "journal {}: restarting a run (ids up to {}, epochs up to {} were used)",
              journal_->path(), found.ceilings.last_id, found.ceilings.last_epoch);
    membership_.raise_floors(found.ceilings.last_id, found.ceilings.last_epoch);
  }
  membership_.begin_recovery();
  return Status::ok();
}

Status MasterServer::cover_in_journal(uint64_t epoch) {
  if (!journal_) return Status::ok();
  return journal_->cover(membership_.last_id() + 1, epoch);
}

std::chrono::milliseconds MasterServer::recovery_window() const {
  // Members back off to at most half a second between tries (peer/session_reconnect.cpp): two
  // seconds, or the time a silent peer is declared dead if longer, brings back every live one.
  return std::max<std::chrono::milliseconds>(
      std::chrono::seconds(2), options_.heartbeat_interval * options_.heartbeat_misses);
}

void MasterServer::begin_recovery() {
  membership_.begin_recovery();
  log::info("master", "recovering: members of the earlier master rejoin for up to {} ms",
            recovery_window().count());
  recovery_timer_.expires_after(recovery_window());
  recovery_timer_.async_wait([weak = weak_from_this()](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->stopped_) return;
    self->finish_recovery();
  });
}

void MasterServer::finish_recovery() {
  if (!membership_.recovering()) return;
  recovery_timer_.cancel();
  membership_.finish_recovery();
  batch_.finish_recovery();
}

Status MasterServer::on_rejoin(Session& session, uint64_t conn, const wire::RejoinMsg& rejoin) {
  auto seen = seen_from(session);
  if (!seen) return seen.status();
  const std::string& peer_host = *seen;
  if (!membership_.recovering()) {
    // A rejoin naming an epoch this master never proposed: it restarted without a journal (or
    // the journal's ceilings were lost). Anything else is a member whose control link broke while
    // this master kept running: the run went on without it.
    if (rejoin.epoch <= membership_.last_epoch() ||
        membership_.members().contains(rejoin.peer_id)) {
      if (membership_.members().contains(rejoin.peer_id)) {
        disconnect(rejoin.peer_id, peer_lost("its control link broke"));
        membership_.drop_peer(rejoin.peer_id, "its control link broke and it reconnected");
      }
      return peer_lost(fmt::format(
          "this master did not restart and no longer counts peer {} as a member (its control "
          "link broke): join again as a new peer",
          rejoin.peer_id));
    }
    begin_recovery();
  }
  Membership::RejoinReport report;
  report.id = rejoin.peer_id;
  report.group = rejoin.group;
  report.host = rejoin.advertised_host.empty() ? peer_host : rejoin.advertised_host;
  report.port = rejoin.advertised_port;
  report.node = NodeClaim{rejoin.node, rejoin.rail, rejoin.rails, rejoin.group, peer_host};
  report.epoch = rejoin.epoch;
  report.world = rejoin.world;
  report.ring = rejoin.ring;
  report.proposed_epoch = rejoin.proposed_epoch;
  report.proposed_ring = rejoin.proposed_ring;
  report.full_mesh = rejoin.full_mesh;
  LH_RETURN_IF_ERROR(membership_.add_rejoined(report));
  if (Status s = cover_in_journal(membership_.last_epoch()); !s)
    log::error("master", "the journal cannot record peer {}'s rejoin: {}", rejoin.peer_id,
               s.to_string());
  session.register_deadline.reset();
  session.peer = rejoin.peer_id;
  by_peer_[rejoin.peer_id] = conn;
  send(rejoin.peer_id,
       wire::WelcomeMsg{rejoin.peer_id, static_cast<uint32_t>(options_.heartbeat_interval.count()),
                        options_.heartbeat_misses});
  recorder_.joined(rejoin.peer_id, rejoin.group, unix_now());
  if (rejoin.decided_attempt != 0)
    batch_.record_decision(rejoin.group, rejoin.epoch, rejoin.decided_attempt, rejoin.decided_ok);
  // After the WELCOME: a violation drops the peer as a member, its node with it. Recovery ends
  // first if this was the last member to rejoin, so that it need not wait for its timer.
  const Status agreed =
      node_agreement_.on_rejoin(rejoin.peer_id, rejoin.node_answered, rejoin.node_answer);
  if (membership_.everyone_rejoined()) finish_recovery();
  return agreed;
}

}  // namespace longhaul::master
