#include "master/server.hpp"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>
#include <asio/bind_executor.hpp>
#include <asio/post.hpp>

#include "common/log.hpp"
#include "master/reach_probe.hpp"

namespace longhaul::master {
double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Result<std::shared_ptr<MasterServer>> MasterServer::create(runtime::IoRuntime& io,
                                                           const MasterOptions& options) {
  if (options.heartbeat_interval.count() <= 0 || options.heartbeat_misses == 0)
    return invalid_argument("heartbeat interval and misses must be positive");
  if (options.topology_timeout.count() <= 0 || options.topology_grace.count() <= 0 ||
      options.round_timeout.count() <= 0 || options.gather_timeout.count() <= 0)
    return invalid_argument(
        "topology timeout, topology grace, round timeout and gather timeout must be positive");
  const PaceRule& pace = options.state_pace;
  if (pace.floor.count() <= 0 || pace.window == 0 || pace.outliers_to_evict == 0 ||
      pace.outliers_to_evict > pace.window)
    return invalid_argument(fmt::format(
        "the state-sync deadline floor must be positive and the outliers that evict ({}) between "
        "1 and the window ({})",
        pace.outliers_to_evict, pace.window));
  net::TransportOptions transport = options.transport;
  transport.role = net::Role::kMaster;
  std::unique_ptr<Journal> journal;
  Journal::Found found;
  if (!options.journal_path.empty()) {
    auto opened = Journal::open(options.journal_path, &found);
    if (!opened) return opened.status().with_context("the master's journal");
    journal = std::move(*opened);
  }
  auto listener = net::Listener::create(io, options.listen_host, options.listen_port, transport);
  if (!listener) return listener.status();
  std::shared_ptr<MasterServer> server(new MasterServer(io, options, std::move(*listener)));
  if (journal) LH_RETURN_IF_ERROR(server->adopt_journal(std::move(journal), found));
  return server;
}

MasterServer::MasterServer(runtime::IoRuntime& io, const MasterOptions& options,
                           std::shared_ptr<net::Listener> listener)
    : io_(io),
      options_(options),
      listener_(std::move(listener)),
      port_(listener_->port()),
      strand_(asio::make_strand(io.context())),
      heartbeat_timer_(strand_),
      round_timer_(strand_),
      recovery_timer_(strand_),
      recorder_(unix_now()) {}

MasterServer::~MasterServer() {
  listener_->close();
}

void MasterServer::start() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->started_ || self->stopped_) return;
    self->started_ = true;
    std::weak_ptr<MasterServer> weak = self;
    self->listener_->start([weak](std::shared_ptr<net::Link> link, net::Role role) {
      if (auto s = weak.lock())
        s->on_link(std::move(link), role);
      else
        link->close();
    });
    self->arm_heartbeat();
    if (self->membership_.recovering()) self->begin_recovery();
    self->publish_status();
    log::info("master", "listening on port {} (heartbeat every {} ms, dead after {} misses)",
              self->port_, self->options_.heartbeat_interval.count(),
              self->options_.heartbeat_misses);
  });
}

void MasterServer::stop() {
  // A stop ends the run: each registered peer is told (REMOVED), so that it ends at once instead of
  // reconnecting to a master that is not coming back (a crash, by contrast, tells nobody, and the
  // peers wait for the restarted master). The notices get a moment to go out.
  auto notices = std::make_shared<std::promise<void>>();
  auto notices_sent = notices->get_future();
  std::promise<void> done;
  auto future = done.get_future();
  asio::post(strand_, [self = shared_from_this(), &done, notices,
                       blocking = !io_.in_runtime_thread()] {
    if (!self->stopped_) {
      self->stopped_ = true;
      self->listener_->close();
      self->heartbeat_timer_.cancel();
      self->round_timer_.cancel();
      self->recovery_timer_.cancel();
      const Status why = peer_lost("the master is shutting down: the run is over");
      const auto goodbye = wire::encode_control(wire::RemovedMsg{why.code(), why.message()});
      auto remaining = std::make_shared<std::atomic<size_t>>(0);
      for (auto& [conn, session] : self->sessions_)
        if (session.peer != 0) remaining->fetch_add(1);
      if (remaining->load() == 0) notices->set_value();
      for (auto& [conn, session] : self->sessions_) {
        if (session.peer == 0) {
          session.link->close(closed_error("the master is shutting down"));
          continue;
        }
        session.link->send_control(goodbye, [link = session.link, why, remaining, notices](Status) {
          link->close(why);
          if (remaining->fetch_sub(1) == 1) notices->set_value();
        });
      }
      self->sessions_.clear();
      self->by_peer_.clear();
      log::info("master", "stopped");
    } else {
      notices->set_value();
    }
    if (blocking) done.set_value();
  });
  if (io_.in_runtime_thread()) return;
  future.wait();
  notices_sent.wait_for(std::chrono::milliseconds(500));
}

MasterSnapshot MasterServer::snapshot() {
  std::promise<MasterSnapshot> promise;
  auto future = promise.get_future();
  asio::post(strand_, [this, &promise] {
    MasterSnapshot s;
    s.epoch = membership_.epoch();
    s.active_peers = membership_.active_count();
    s.pending_peers = membership_.members().size() - s.active_peers;
    s.connections = sessions_.size();
    s.rings = membership_.rings();
    promise.set_value(std::move(s));
  });
  return future.get();
}

void MasterServer::on_link(std::shared_ptr<net::Link> link, net::Role role) {
  asio::post(strand_, [self = shared_from_this(), link = std::move(link), role]() mutable {
    if (self->stopped_) {
      link->close(closed_error("the master is shutting down"));
      return;
    }
    if (role != net::Role::kPeer || link->connection_count() != 1) {
      log::warn(
          "master",
          "refused {} link from {} with {} connections: only peers with one control connection "
          "may connect to the master",
          net::role_name(role), link->peer(), link->connection_count());
      link->close(protocol_error("only peers may connect to the master"));
      return;
    }
    const uint64_t conn = ++self->next_conn_;
    Session& session = self->sessions_[conn];
    session.link = link;
    session.last_heard = Clock::now();
    session.register_deadline = std::make_unique<asio::steady_timer>(
        self->strand_, self->options_.transport.handshake_timeout);
    std::weak_ptr<MasterServer> weak = self;
    session.register_deadline->async_wait([weak, conn](asio::error_code ec) {
      auto s = weak.lock();
      if (ec || !s) return;
      auto it = s->sessions_.find(conn);
      if (it != s->sessions_.end() && it->second.peer == 0)
        s->drop_connection(conn, protocol_error("no REGISTER within the handshake timeout"));
    });
    link->start(
        [weak, conn](std::vector<std::byte> bytes) {
          auto s = weak.lock();
          if (!s) return;
          // Decoded on the link's I/O thread, not on the strand: a report of 65536 tensors takes
          // ~12 ms to decode, which every other member's messages would otherwise wait behind.
          // The link hands over its messages one at a time, in order, and the strand runs them
          // in the order posted.
          auto message = wire::decode_control(bytes);
          asio::post(s->strand_, [s, conn, message = std::move(message)]() mutable {
            s->on_message(conn, std::move(message));
          });
        },
        [weak, conn](const Status& why) {
          if (auto s = weak.lock())
            asio::post(s->strand_, [s, conn, why] { s->on_link_failed(conn, why); });
        });
  });
}

void MasterServer::on_message(uint64_t conn, Result<wire::ControlMessage> message) {
  auto it = sessions_.find(conn);
  if (it == sessions_.end()) return;  // dropped already
  Session& session = it->second;
  session.last_heard = Clock::now();
  Status s = message ? dispatch(session, conn, std::move(*message)) : message.status();
  if (!s) drop_connection(conn, s);
}

Result<std::string> MasterServer::seen_from(const Session& session) {
  std::string host;
  uint16_t ignored = 0;
  if (Status p = net::parse_host_port(session.link->peer(), &host, &ignored); !p)
    return internal_error(
        fmt::format("cannot parse the peer's address '{}'", session.link->peer()));
  return host;
}

Status MasterServer::on_register(Session& session, uint64_t conn, const wire::RegisterMsg& reg) {
  if (reg.advertised_port == 0) return protocol_error("REGISTER with data port 0");
  auto seen = seen_from(session);
  if (!seen) return seen.status();
  const std::string& peer_host = *seen;
  const std::string host = reg.advertised_host.empty() ? peer_host : reg.advertised_host;
  // A rank's node claim is checked before it gets an id: a refused claim joins nothing.
  const NodeClaim node{reg.node, reg.rail, reg.rails, reg.group, peer_host};
  LH_RETURN_IF_ERROR(check_backoff(host, reg.advertised_port, reg.node, peer_host));
  LH_RETURN_IF_ERROR(membership_.check_node_claim(node));
  // The id is in the journal before anyone hears of it.
  LH_RETURN_IF_ERROR(cover_in_journal(membership_.last_epoch()));
  session.register_deadline.reset();
  const PeerId id = membership_.allocate_id();
  session.peer = id;
  by_peer_[id] = conn;
  send(id, wire::WelcomeMsg{id, static_cast<uint32_t>(options_.heartbeat_interval.count()),
                            options_.heartbeat_misses});
  recorder_.joined(id, reg.group, unix_now());
  membership_.add_pending(id, reg.group, host, reg.advertised_port, node, reg.full_mesh);
  probe_reachable(strand_, host, reg.advertised_port, options_.transport.handshake_timeout,
                  [weak = weak_from_this(), id](bool reached) {
                    if (auto self = weak.lock()) self->membership_.note_reached(id, reached);
                  });
  return Status::ok();
}

Status MasterServer::dispatch(Session& session, uint64_t conn, wire::ControlMessage message) {
  const auto type = wire::control_type(message);
  if (session.peer == 0) {
    if (const auto* reg = std::get_if<wire::RegisterMsg>(&message))
      return on_register(session, conn, *reg);
    if (const auto* rejoin = std::get_if<wire::RejoinMsg>(&message))
      return on_rejoin(session, conn, *rejoin);
    return protocol_error(
        fmt::format("expected REGISTER or REJOIN first, got {}", wire::control_type_name(type)));
  }
  const PeerId id = session.peer;
  return std::visit(
      [&](auto& m) -> Status {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::HeartbeatMsg>) {
          return Status::ok();
        } else if constexpr (std::is_same_v<T, wire::PeerStatsMsg>) {
          recorder_.stats(id, std::move(m), unix_now());
          return Status::ok();
        } else if constexpr (std::is_same_v<T, wire::UpdateTopologyMsg>) {
          return membership_.on_update_topology(id, m.epoch, m.admit_joiners);
        } else if constexpr (std::is_same_v<T, wire::LinksReadyMsg>) {
          return membership_.on_links_ready(id, m.epoch, m.unreachable);
        } else if constexpr (std::is_same_v<T, wire::BatchReportMsg>) {
          return batch_.on_report(id, m);
        } else if constexpr (std::is_same_v<T, wire::NodeAgreeMsg>) {
          return node_agreement_.on_agree(id, m);
        } else if constexpr (std::is_same_v<T, wire::StateReportMsg>) {
          return state_.on_report(id, std::move(m));
        } else if constexpr (std::is_same_v<T, wire::StateDoneMsg>) {
          return state_.on_done(id, m);
        } else if constexpr (std::is_same_v<T, wire::ReportPeerLostMsg>) {
          return membership_.on_peer_lost(id, m.epoch, m.peer_id, m.reason);
        } else if constexpr (std::is_same_v<T, wire::AbortRequestMsg>) {
          return membership_.on_abort_request(id, m.epoch, m.reason);
        } else if constexpr (std::is_same_v<T, wire::LeaveMsg>) {
          auto link = session.link;
          by_peer_.erase(id);
          sessions_.erase(conn);
          // Closing once BYE is written; the peer closes on BYE too.
          write(*link, wire::ByeMsg{}, [link](Status) { link->close(closed_error("peer left")); });
          membership_.drop_peer(
              id,
              m.reason.empty() ? "left gracefully" : fmt::format("left gracefully ({})", m.reason),
              /*graceful=*/true);
          return Status::ok();
        } else {
          return protocol_error(
              fmt::format("unexpected {} from a peer", wire::control_type_name(type)));
        }
      },
      message);
}

void MasterServer::on_link_failed(uint64_t conn, const Status& why) {
  auto it = sessions_.find(conn);
  if (it == sessions_.end()) return;
  const PeerId id = it->second.peer;
  if (id) by_peer_.erase(id);
  sessions_.erase(it);
  if (id)
    membership_.drop_peer(id, fmt::format("connection lost ({})", why.to_string()));
  else
    log::info("master", "unregistered connection closed: {}", why.to_string());
}

void MasterServer::drop_connection(uint64_t conn, const Status& why) {
  auto it = sessions_.find(conn);
  if (it == sessions_.end()) return;
  auto link = it->second.link;
  const PeerId id = it->second.peer;
  if (id) by_peer_.erase(id);
  sessions_.erase(it);
  log::warn("master", "dropping connection from {}{}: {}", link->peer(),
            id ? fmt::format(" (peer {})", id) : "", why.to_string());
  write(*link, wire::RemovedMsg{why.code(), why.message().substr(0, wire::kMaxReasonBytes)},
        [link, why](Status) { link->close(why); });
  if (id) membership_.drop_peer(id, fmt::format("dropped: {}", why.to_string()));
}

// Silence is checked four times per heartbeat interval, so a silent peer is declared dead at most
// a quarter interval after its limit: a check once per interval let the detection drift up to a
// whole interval past it (3.0 to 4.0 s with the defaults; bench/run membership, detect_silent_ms).
std::chrono::milliseconds MasterServer::silence_check() const {
  return std::max<std::chrono::milliseconds>(std::chrono::milliseconds(1),
                                             options_.heartbeat_interval / 4);
}

void MasterServer::arm_heartbeat() {
  heartbeat_timer_.expires_after(silence_check());
  heartbeat_timer_.async_wait([weak = weak_from_this()](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->stopped_) return;
    self->heartbeat_tick();
    self->publish_status();
    self->arm_heartbeat();
  });
}

void MasterServer::heartbeat_tick() {
  const auto now = Clock::now();
  const auto limit = options_.heartbeat_interval * options_.heartbeat_misses;
  // Heartbeats go out at the first check at least (interval - check) after the last one, so two
  // are never further apart than one interval and a timer's lateness (as when a beat went out on
  // every tick of an interval timer); a peer's own silence limit never sees a longer gap.
  const bool beat_due = now - last_beat_ >= options_.heartbeat_interval - silence_check();
  if (beat_due) last_beat_ = now;
  std::vector<std::pair<PeerId, std::chrono::milliseconds>> silent;
  for (auto& [conn, session] : sessions_) {
    if (session.peer == 0) continue;
    const auto quiet =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - session.last_heard);
    if (quiet > limit)
      silent.emplace_back(session.peer, quiet);
    else if (beat_due)
      write(*session.link, wire::HeartbeatMsg{});
  }
  for (const auto& [id, quiet] : silent) {
    Status why = peer_lost(fmt::format("missed {} heartbeats (silent for {} ms)",
                                       options_.heartbeat_misses, quiet.count()));
    membership_.drop_peer(id, why.message());
    disconnect(id, why);
  }
  check_round_deadlines(now);
}

void MasterServer::publish_status() {
  RunStatus status = recorder_.build(
      membership_, [this](uint32_t group) { return state_.group_revision(group); },
      sessions_.size(), unix_now());
  status.master_sent = sent_.by_name();
  status_box_.publish(std::make_shared<const RunStatus>(std::move(status)));
}

void MasterServer::peer_left(PeerId who, uint32_t group, const std::string& reason, bool graceful) {
  recorder_.left(who, group, reason, graceful, unix_now());
  node_agreement_.on_peer_left(who, graceful);
}

void MasterServer::send(PeerId to, const wire::ControlMessage& message) {
  if (const auto* abort = std::get_if<wire::AbortMsg>(&message))
    recorder_.aborted(abort->group, abort->epoch, abort->reason, unix_now());
  auto it = by_peer_.find(to);
  if (it == by_peer_.end()) return;
  write(*sessions_.at(it->second).link, message);
}

// One encoding for every recipient: a broadcast costs the master its bytes once, not once per
// member (a TOPOLOGY to a large run is the biggest message it sends).
void MasterServer::send_all(const std::vector<PeerId>& to, const wire::ControlMessage& message) {
  if (to.empty()) return;
  if (const auto* abort = std::get_if<wire::AbortMsg>(&message))
    recorder_.aborted(abort->group, abort->epoch, abort->reason, unix_now());
  const auto bytes = wire::encode_control(message);
  const auto type = wire::control_type(message);
  for (PeerId id : to) {
    auto it = by_peer_.find(id);
    if (it == by_peer_.end()) continue;
    sent_.count(type, bytes.size());
    sessions_.at(it->second).link->send_control(bytes);
  }
}

void MasterServer::write(net::Link& link, const wire::ControlMessage& message,
                         net::Link::Completion done) {
  auto bytes = wire::encode_control(message);
  sent_.count(wire::control_type(message), bytes.size());
  link.send_control(std::move(bytes), std::move(done));
}

void MasterServer::disconnect(PeerId who, const Status& why) {
  auto it = by_peer_.find(who);
  if (it == by_peer_.end()) return;
  const uint64_t conn = it->second;
  auto link = sessions_.at(conn).link;
  by_peer_.erase(it);
  sessions_.erase(conn);
  write(*link, wire::RemovedMsg{why.code(), why.message().substr(0, wire::kMaxReasonBytes)},
        [link, why](Status) { link->close(why); });
}

void MasterServer::peer_forgotten(PeerId who) {
  state_.on_peer_gone(who);
}

void MasterServer::group_reconfiguring(uint32_t group) {
  state_.on_group_reconfiguring(group);
}

void MasterServer::group_epoch_failed(uint32_t group) {
  batch_.on_group_epoch_failed(group);
}

void MasterServer::round_started(uint64_t epoch) {
  // The proposal is on its way already; a journal that cannot record it weakens only what a later
  // restart can prove (the members still report this epoch), so the round goes on.
  if (Status s = cover_in_journal(epoch); !s)
    log::error("master", "epoch {} is not in the journal: {}", epoch, s.to_string());
  round_started_at_ = Clock::now();
  arm_round_timer(epoch, round_started_at_ + options_.topology_timeout);
}

}  // namespace longhaul::master
