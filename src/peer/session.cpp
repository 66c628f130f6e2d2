#include "peer/session.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <asio/post.hpp>

#include "common/log.hpp"
#include "peer/node_identity.hpp"

namespace longhaul::peer {
namespace {

// Splits the advertised address into host (may be empty) and port (0: the listener's).
Status parse_advertised(const std::string& text, std::string* host, uint16_t* port) {
  *host = "";
  *port = 0;
  if (text.empty()) return Status::ok();
  if (text.front() == '[' || text.find(':') == text.rfind(':')) {
    if (text.find(':') == std::string::npos) {
      *host = text;
      return Status::ok();
    }
    LH_RETURN_IF_ERROR(net::parse_host_port(text, host, port).with_context("advertised address"));
    if (*port == 0) return invalid_argument("advertised address: port 0 cannot be connected to");
    return Status::ok();
  }
  *host = text;  // a bare IPv6 literal
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<PeerSession>> PeerSession::create(
    runtime::IoRuntime& io, const CommunicatorOptions& options,
    std::shared_ptr<net::TrafficCounter> control_traffic,
    std::shared_ptr<net::TrafficCounter> data_traffic) {
  std::string master_host;
  uint16_t master_port = 0;
  LH_RETURN_IF_ERROR(net::parse_host_port(options.master_address, &master_host, &master_port)
                         .with_context("master address"));
  if (master_port == 0) return invalid_argument("master address: port 0 cannot be connected to");
  if (options.connections_per_link == 0 ||
      options.connections_per_link > net::kMaxConnectionsPerLink)
    return invalid_argument(fmt::format("connections per link must be 1..{}, got {}",
                                        net::kMaxConnectionsPerLink, options.connections_per_link));
  std::string host;
  uint16_t port = 0;
  LH_RETURN_IF_ERROR(parse_advertised(options.advertised_address, &host, &port));
  if (options.connect_timeout.count() <= 0 || options.link_timeout.count() <= 0)
    return invalid_argument("connect and link timeouts must be positive");
  if (options.master_reconnect_timeout.count() < 0)
    return invalid_argument("the master reconnect timeout must not be negative");
  LH_RETURN_IF_ERROR(validate_node(options));
  Strand strand = asio::make_strand(io.context());
  auto mesh = Mesh::create(io, strand, options, std::move(data_traffic));
  if (!mesh) return mesh.status();
  return std::shared_ptr<PeerSession>(new PeerSession(io, options, std::move(strand),
                                                      std::move(*mesh), std::move(master_host),
                                                      master_port, std::move(control_traffic)));
}

PeerSession::PeerSession(runtime::IoRuntime& io, const CommunicatorOptions& options, Strand strand,
                         std::shared_ptr<Mesh> mesh, std::string master_host, uint16_t master_port,
                         std::shared_ptr<net::TrafficCounter> control_traffic)
    : io_(io),
      options_(options),
      strand_(std::move(strand)),
      mesh_(std::move(mesh)),
      master_host_(std::move(master_host)),
      master_port_(master_port),
      control_traffic_(std::move(control_traffic)),
      heartbeat_timer_(strand_),
      reconnect_timer_(strand_) {}

PeerSession::~PeerSession() = default;

void PeerSession::set_abort_handler(AbortHandler handler) {
  MutexLock lock(mu_);
  on_abort_ = std::move(handler);
}

void PeerSession::set_master_lost_handler(AbortHandler handler) {
  MutexLock lock(mu_);
  on_master_lost_ = std::move(handler);
}

void PeerSession::set_state_handler(StateHandler handler) {
  MutexLock lock(mu_);
  on_state_ = std::move(handler);
}

Status PeerSession::send_state_message(wire::ControlMessage message) {
  if (Status f = failure(); !f) return f;
  if (master_away_.load())
    return Status(LH_ERR_ABORTED, "the master is away (the session is reconnecting)");
  if (view().epoch == 0) return invalid_argument("the communicator is not connected");
  // Encoded here, off the strand; a message the master could not take fails now, with its size.
  auto bytes = wire::encode_control(message);
  if (const uint32_t limit = options_.transport.limits.max_control_payload; bytes.size() > limit)
    return Status(
        LH_ERR_UNSUPPORTED,
        fmt::format("{} of {} bytes exceeds the {} bytes a control message may carry",
                    wire::control_type_name(wire::control_type(message)), bytes.size(), limit));
  asio::post(strand_, [self = shared_from_this(), bytes = std::move(bytes)]() mutable {
    if (self->state_ == State::kActive && self->master_)
      self->master_->send_control(std::move(bytes));
  });
  return Status::ok();
}

void PeerSession::request_abort(uint64_t epoch, const std::string& reason) {
  asio::post(strand_, [self = shared_from_this(), epoch,
                       reason = reason.substr(0, wire::kMaxReasonBytes)]() mutable {
    if (self->state_ == State::kActive && self->master_ && self->epoch_ == epoch)
      self->send(wire::AbortRequestMsg{epoch, std::move(reason)});
  });
}

void PeerSession::set_stats_source(StatsSource source) {
  MutexLock lock(mu_);
  stats_source_ = std::move(source);
}

void PeerSession::set_service_handler(Mesh::ServiceHandler handler) {
  asio::post(strand_, [self = shared_from_this(), handler = std::move(handler)]() mutable {
    self->mesh_->set_service_handler(std::move(handler));
  });
}

TopologyView PeerSession::view() const {
  MutexLock lock(mu_);
  return view_;
}

Status PeerSession::failure() const {
  MutexLock lock(mu_);
  return failure_;
}

Status PeerSession::run_call(std::function<void()> start,
                             std::optional<std::chrono::milliseconds> timeout, const char* what) {
  if (io_.in_runtime_thread())
    return internal_error(fmt::format("{} would block an I/O thread", what));
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  asio::post(strand_, [self = shared_from_this(), promise, start = std::move(start), what] {
    if (self->call_) {
      promise->set_value(invalid_argument(
          fmt::format("{} called while another blocking call is in progress", what)));
      return;
    }
    self->call_ = promise;
    start();
  });
  if (timeout && future.wait_for(*timeout) == std::future_status::timeout) {
    asio::post(strand_, [self = shared_from_this(), promise, timeout, what] {
      if (self->call_ != promise) return;
      const bool node_incomplete = self->state_ == State::kJoining && !self->node_waiting_.empty();
      self->fail(
          timeout_error(fmt::format("{} did not complete within {} ms{}", what, timeout->count(),
                                    node_incomplete ? ": " + self->node_waiting_ : std::string())));
    });
  }
  return future.get();
}

void PeerSession::complete_call(Status s) {
  if (!call_) return;
  auto call = std::move(call_);
  call_.reset();
  call->set_value(std::move(s));
}

Status PeerSession::connect() {
  return run_call(
      [this] {
        if (state_ == State::kLeft)
          return complete_call(closed_error("the communicator has left the run (lh_comm_leave)"));
        if (state_ != State::kIdle) {
          complete_call(state_ == State::kFailed
                            ? failure()
                            : invalid_argument("connect may be called only once"));
          return;
        }
        state_ = State::kRegistering;
        std::weak_ptr<PeerSession> weak = weak_from_this();
        mesh_->start(
            [weak](uint64_t epoch, std::vector<PeerId> unreachable) {
              auto self = weak.lock();
              if (!self || self->state_ != State::kLinking || !self->proposal_ ||
                  self->proposal_->epoch != epoch)
                return;
              self->send(wire::LinksReadyMsg{epoch, std::move(unreachable)});
            },
            [weak](uint64_t epoch, PeerId neighbour, Status why) {
              auto self = weak.lock();
              if (!self || (self->state_ != State::kActive && self->state_ != State::kUpdating))
                return;
              self->send(wire::ReportPeerLostMsg{epoch, neighbour,
                                                 why.message().substr(0, wire::kMaxReasonBytes)});
            });
        async_connect_master();
      },
      options_.connect_timeout, "connect");
}

Status PeerSession::update_topology(bool admit_joiners) {
  return run_call(
      [this, admit_joiners] {
        if (state_ == State::kFailed) return complete_call(failure());
        if (state_ == State::kLeft)
          return complete_call(closed_error("the communicator has left the run"));
        if (state_ == State::kReconnecting || state_ == State::kRejoining) {
          resume_ = State::kUpdating;  // sent once the master is back
          update_admit_ = admit_joiners;
          return;
        }
        if (state_ != State::kActive)
          return complete_call(invalid_argument("update_topology needs a connected communicator"));
        state_ = State::kUpdating;
        update_admit_ = admit_joiners;
        report_failed_links();
        send(wire::UpdateTopologyMsg{epoch_, admit_joiners});
      },
      std::nullopt, "update_topology");
}

void PeerSession::report_failed_links() {
  // The mesh reports a dead link from its own strand, and a caller whose collective failed on that
  // link can get here first: the master, not yet told, would answer that nothing changed, and the
  // retry would fail at once on the same ring. A link the mesh has not handled yet is still in the
  // published ring, failed; report it now (a second report of the same loss is ignored).
  const RingLinks links = mesh_->ring_links();
  if (links.epoch != epoch_) return;
  for (size_t r = 0; r < links.by_rank.size(); ++r) {
    const auto& link = links.by_rank[r];
    if (!link) continue;
    if (Status why = link->failure(); !why.is_ok())
      send(wire::ReportPeerLostMsg{epoch_, links.ring[r],
                                   why.message().substr(0, wire::kMaxReasonBytes)});
  }
}

Status PeerSession::report_and_wait(std::function<wire::ControlMessage()> record,
                                    std::optional<std::chrono::milliseconds> timeout,
                                    const char* what) {
  return run_call(
      [this, record = std::move(record), what] {
        if (state_ == State::kFailed) return complete_call(failure());
        const bool away = state_ == State::kReconnecting || state_ == State::kRejoining;
        if (state_ != State::kActive && !away)
          return complete_call(
              invalid_argument(fmt::format("{} needs a connected communicator", what)));
        const wire::ControlMessage report = record();
        // While the master is away the report goes out once it is back (resume_after_rejoin).
        if (!away) send(report);
      },
      timeout, what);
}

Result<bool> PeerSession::decide_batch(bool ok, bool late) {
  auto decision = std::make_shared<bool>(false);
  Status s = report_and_wait(
      [this, ok, late, decision] {
        batch_decision_ = decision;
        batch_ok_ = ok;
        batch_late_ = late;
        ++batch_attempt_;
        return wire::BatchReportMsg{epoch_, batch_attempt_, ok, late};
      },
      kBatchDecisionTimeout, "the batch decision");
  if (!s) return s;
  return *decision;
}

Result<Decision> PeerSession::decide(AttemptReport report) {
  auto all_succeeded = decide_batch(report.ok, report.late);
  if (!all_succeeded) return all_succeeded.status();
  Decision decision;
  decision.all_succeeded = *all_succeeded;
  if (decision.all_succeeded) decision.members = view().ring;  // the epoch did not change
  return decision;
}

Result<uint32_t> PeerSession::agree_in_node(uint32_t kind, uint32_t flags) {
  if (options_.rails <= 1) return flags;
  auto agreed = std::make_shared<uint32_t>(0);
  Status s = report_and_wait(
      [this, kind, flags, agreed] {
        node_agreed_ = agreed;
        node_kind_ = kind;
        node_flags_ = flags;
        ++node_point_;
        return wire::NodeAgreeMsg{node_point_, kind, flags};
      },
      std::nullopt, "the node agreement");
  if (!s) return s;
  return *agreed;
}

Status PeerSession::leave(const std::string& reason) {
  left_.store(true);  // whatever the master answers, the communicator is of no further use
  return run_call(
      [this, reason] {
        if (state_ == State::kFailed) return complete_call(failure());
        if (state_ == State::kLeft) return complete_call(Status::ok());
        if (state_ == State::kIdle || state_ == State::kReconnecting ||
            state_ == State::kRejoining) {
          // No master to tell (or none that knows this peer yet): it notices the closed links.
          state_ = State::kLeft;
          master_away_.store(false);
          shutdown_network();
          return complete_call(Status::ok());
        }
        state_ = State::kLeaving;
        send(wire::LeaveMsg{reason.substr(0, wire::kMaxReasonBytes)});
        // The master answers BYE at once; without it within a few seconds, leave anyway.
        auto timer = std::make_shared<asio::steady_timer>(strand_, std::chrono::seconds(5));
        timer->async_wait([weak = weak_from_this(), timer](asio::error_code ec) {
          auto self = weak.lock();
          if (ec || !self || self->state_ != State::kLeaving) return;
          log::warn("peer", "peer {}: no BYE from the master; leaving anyway", self->id_);
          self->state_ = State::kLeft;
          self->shutdown_network();
          self->complete_call(Status::ok());
        });
      },
      std::nullopt, "leave");
}

void PeerSession::close() {
  std::promise<void> done;
  auto future = done.get_future();
  const bool blocking = !io_.in_runtime_thread();
  asio::post(strand_, [self = shared_from_this(), &done, blocking] {
    if (self->state_ != State::kFailed && self->state_ != State::kLeft)
      self->fail(closed_error("communicator closed"));
    self->shutdown_network();
    if (blocking) done.set_value();
  });
  if (blocking) future.wait();
}

void PeerSession::on_master_link(Result<std::shared_ptr<net::Link>> result) {
  if (state_ != State::kRegistering) {
    if (result) (*result)->close();
    return;
  }
  if (!result && net::is_retry_later(result.status())) return register_again_later(result.status());
  if (!result) {
    fail(result.status().with_context(
        fmt::format("cannot join the master at {}", options_.master_address)));
    return;
  }
  attach_master_link(std::move(*result));
  std::string host;
  uint16_t port = 0;
  (void)parse_advertised(options_.advertised_address, &host, &port);  // validated in create()
  advertised_host_ = host;
  advertised_port_ = port ? port : mesh_->port();
  send(wire::RegisterMsg{options_.group, advertised_host_, advertised_port_, options_.node,
                         options_.rail, options_.rails, options_.full_mesh});
}

void PeerSession::async_connect_master() {
  net::TransportOptions transport = options_.transport;
  transport.role = net::Role::kPeer;
  net::async_connect_link(io_, master_host_, master_port_, 1, transport,
                          [weak = weak_from_this()](Result<std::shared_ptr<net::Link>> r) {
                            auto self = weak.lock();
                            if (!self) {
                              if (r) (*r)->close();
                              return;
                            }
                            asio::post(self->strand_, [self, r = std::move(r)]() mutable {
                              if (self->state_ == State::kReconnecting)
                                self->on_reconnect(std::move(r));
                              else
                                self->on_master_link(std::move(r));
                            });
                          });
}

void PeerSession::attach_master_link(std::shared_ptr<net::Link> link) {
  master_ = std::move(link);
  master_->count_traffic(control_traffic_);
  std::weak_ptr<PeerSession> weak = weak_from_this();
  master_->start(
      [weak, link = std::weak_ptr<net::Link>(master_)](std::vector<std::byte> bytes) {
        if (auto self = weak.lock())
          asio::post(self->strand_, [self, link, bytes = std::move(bytes)] {
            // Bytes of a link given up already (the master was lost and reconnected meanwhile).
            auto current = link.lock();
            if (current && self->master_ == current) self->on_master_message(bytes);
          });
      },
      [weak, link = std::weak_ptr<net::Link>(master_)](const Status& why) {
        auto self = weak.lock();
        if (!self) return;
        asio::post(self->strand_, [self, link, why] {
          auto current = link.lock();
          if (!current || self->master_ != current) return;
          if (self->state_ == State::kLeaving) {
            self->state_ = State::kLeft;
            self->shutdown_network();
            self->complete_call(Status::ok());
            return;
          }
          self->lose_master(
              peer_lost(fmt::format("lost the connection to the master: {}", why.message())));
        });
      });
  last_heard_ = Clock::now();
}

void PeerSession::send(const wire::ControlMessage& m) {
  if (master_) master_->send_control(wire::encode_control(m));
}

void PeerSession::fail(Status why) {
  if (state_ == State::kFailed || state_ == State::kLeft) return;
  state_ = State::kFailed;
  failed_.store(true);
  set_pending(pending_.load());  // wakes wait_for_pending: peers_pending() is true now
  master_away_.store(false);
  AbortHandler handler;
  StateHandler state_handler;
  {
    MutexLock lock(mu_);
    failure_ = why;
    handler = on_abort_;
    state_handler = on_state_;
  }
  if (state_handler) state_handler(why);
  if (why.code() != LH_ERR_CLOSED)
    log::warn("peer", "peer {}: session ended: {}", id_, why.to_string());
  shutdown_network(why);  // operations failing on a closed link report why, not "closed"
  complete_call(why);
  if (handler && why.code() != LH_ERR_CLOSED) handler(epoch_, why);  // not for a local close
}

void PeerSession::shutdown_network(const Status& why) {
  heartbeat_timer_.cancel();
  reconnect_timer_.cancel();
  if (master_) master_->close(closed_error("session closed"));
  mesh_->close(why);
}

void PeerSession::arm_heartbeat() {
  heartbeat_timer_.expires_after(heartbeat_interval_);
  heartbeat_timer_.async_wait([weak = weak_from_this()](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->state_ == State::kFailed || self->state_ == State::kLeft) return;
    if (self->state_ == State::kReconnecting) {  // no master to hear from or to beat to
      self->arm_heartbeat();
      return;
    }
    const auto quiet =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - self->last_heard_);
    if (quiet > self->heartbeat_interval_ * self->heartbeat_misses_) {
      self->lose_master(
          peer_lost(fmt::format("the master was silent for {} ms ({} heartbeats missed)",
                                quiet.count(), self->heartbeat_misses_)));
      if (self->state_ == State::kReconnecting) self->arm_heartbeat();
      return;
    }
    self->send(wire::HeartbeatMsg{});
    StatsSource stats;
    {
      MutexLock lock(self->mu_);
      stats = self->stats_source_;
    }
    if (stats && self->epoch_ != 0 && self->state_ != State::kLeaving)
      self->send(stats(self->mesh_->ring_links()));
    self->arm_heartbeat();
  });
}

void PeerSession::publish_view(const Topology& t) {
  TopologyView v;
  v.epoch = t.epoch;
  v.peer_id = t.self;
  v.world_size = t.world_size();
  v.group_world_size = t.group_world_size();
  v.rank = t.rank();
  v.group_count = t.group_count();
  v.ring = t.ring();
  MutexLock lock(mu_);
  view_ = std::move(v);
}

}  // namespace longhaul::peer
