// The master's network glue: accepts peers' control links, decodes their messages, keeps the
// heartbeats, and drives the Membership state machine. Everything runs on one strand.
//
// Per connection: the link must REGISTER within the handshake timeout; every message is decoded
// strictly (wire/control_messages.hpp) and any violation (malformed bytes, a message only the
// master sends, a message out of order) drops that connection with a logged reason and, when it
// was a registered peer, counts as that peer leaving. A peer silent for heartbeat_misses
// intervals (checked every quarter interval), or whose socket fails, is gone too. Nothing a remote
// end sends can stop the master.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "common/status.hpp"
#include "master/batch_arbiter.hpp"
#include "master/journal.hpp"
#include "master/membership.hpp"
#include "master/node_agreement.hpp"
#include "master/penalties.hpp"
#include "master/run_recorder.hpp"
#include "master/send_counters.hpp"
#include "master/state_arbiter.hpp"
#include "net/endpoint.hpp"

namespace longhaul::master {

// Seconds since the Unix epoch: the time the run recorder (status page) shows.
double unix_now();

// The default listen address as one "host:port" string (lh_master_options_init hands it out); it
// is listen_host and listen_port below.
inline constexpr char kDefaultListenAddress[] = "0.0.0.0:0";

// The member defaults are the one place the master's defaults are written: lh_master_options_init
// copies them, and longhaul.hpp's MasterOptions copies lh_master_options_init.
struct MasterOptions {
  std::string listen_host = "0.0.0.0";
  uint16_t listen_port = 0;  // 0 = ephemeral (read it back with port())
  // Cluster secret and TLS for the control links; role is forced to kMaster.
  net::TransportOptions transport;
  // Heartbeats in both directions: sent every interval, a side silent for `misses` intervals is
  // declared dead. Peers learn both values from the master when they register.
  std::chrono::milliseconds heartbeat_interval{1000};
  uint32_t heartbeat_misses = 3;
  // A reconfiguration round whose participants have not all reported their links after this long
  // evicts the ones that have not.
  std::chrono::milliseconds topology_timeout{30000};
  // Once half of a reconfiguration round's participants have reported their links, the others
  // get max(this, 4 x the time the first half took), within topology_timeout (a member that
  // links but never confirms holds the rest for this, not for the whole timeout). Keep it above
  // the peers' link_timeout (10 s by default): a peer waiting on an unreachable neighbour
  // answers only then.
  std::chrono::milliseconds topology_grace{15000};
  // A batch attempt waits this long for its reports; a state sync at most this long for the
  // group's missing reports, and this long plus its planned bytes at 1 MiB/s for its fetchers,
  // less once the group's recent syncs show it needs less (state_pace below; state_arbiter.hpp,
  // batch_arbiter.hpp).
  std::chrono::milliseconds round_timeout{30000};
  // Members waiting in update_topology for the rest of the run to come (to admit a joiner or
  // re-form a ring) wait at most this long; the active members that have not come are evicted.
  // Long, because an honest trainer comes only at its next collective (a DiLoCo outer step).
  std::chrono::milliseconds gather_timeout{600000};
  // A member evicted for misbehaving (a missed deadline, link claims nobody confirms) cannot
  // register again from the same data address and node for this long, doubled with each offence
  // up to 10 minutes; from the second failed admission or false claim of one source address on,
  // no registration from that address can (penalties.hpp). 0: nothing is remembered.
  std::chrono::milliseconds misbehaviour_backoff{10000};
  // A member's state report may name at most this many tensors; beyond it the member is dropped
  // with the reason (planning a sync costs the master time in the number of tensors reported).
  uint32_t max_state_tensors = 65536;
  // How long a state sync waits for a member, learned from the group's recent syncs within
  // round_timeout, and how many of its last syncs a member may spend outside that before it is
  // evicted (sync_pace.hpp).
  PaceRule state_pace;
  // An engine round that runs past a member's deadline fails; a member the group waited for in
  // this many such rounds in a row (it had not started the round when the others' deadline
  // passed) is evicted, so the rounds go on without it (batch_arbiter.hpp). 0: never. Three: one
  // slow moment (a checkpoint, a pause) is forgiven, a member slower than the group is not kept.
  uint32_t evict_after_missed = 3;
  // Where the master keeps its journal (journal.hpp); empty: none. A master started on a journal
  // an earlier master left is a restart: for a recovery window it lets the members of the run
  // rejoin before it re-forms the rings, and the ids and epochs it hands out continue above the
  // earlier master's. Without a journal a restart is still recognised (the first REJOIN names an
  // epoch this master never proposed), but a peer registering before the members are back could
  // get the id of one of them (which is then removed, to rejoin as a new peer).
  std::string journal_path;
};

// A point-in-time view of the master's state, for tools and tests.
struct MasterSnapshot {
  uint64_t epoch = 0;
  size_t active_peers = 0;
  size_t pending_peers = 0;
  size_t connections = 0;
  std::map<uint32_t, std::vector<PeerId>> rings;
};

class MasterServer : public std::enable_shared_from_this<MasterServer>, private Outbox {
 public:
  // Binds the listen address; does not accept yet.
  static Result<std::shared_ptr<MasterServer>> create(runtime::IoRuntime& io,
                                                      const MasterOptions& options);
  ~MasterServer() override;

  // Starts accepting peers. Thread-safe; calling it twice is a no-op.
  void start();
  // Closes the listener and every connection (peers see the master go away). Blocks until done
  // unless called from one of the runtime's threads. Thread-safe, idempotent.
  void stop();
  uint16_t port() const { return port_; }
  // Blocks until the strand answers; must not be called from one of the runtime's threads.
  MasterSnapshot snapshot();
  // The run as last published for the status page (run_status.hpp): rebuilt on the strand at
  // start and every heartbeat interval. Thread-safe, never blocks on the strand.
  std::shared_ptr<const RunStatus> status() const { return status_box_.latest(); }

 private:
  struct Session {
    std::shared_ptr<net::Link> link;
    PeerId peer = 0;  // 0 until REGISTER
    std::chrono::steady_clock::time_point last_heard;
    std::unique_ptr<asio::steady_timer> register_deadline;
  };
  using Clock = std::chrono::steady_clock;

  MasterServer(runtime::IoRuntime& io, const MasterOptions& options,
               std::shared_ptr<net::Listener> listener);

  void on_link(std::shared_ptr<net::Link> link, net::Role role);
  // A message the link's I/O thread decoded (or why it could not), on the strand.
  void on_message(uint64_t conn, Result<wire::ControlMessage> message);
  Status dispatch(Session& session, uint64_t conn, wire::ControlMessage message);
  // The host a control link comes from, as the socket sees it.
  static Result<std::string> seen_from(const Session& session);
  Status on_register(Session& session, uint64_t conn, const wire::RegisterMsg& reg);
  // REJOIN (master/recovery.cpp): a member of the previous master comes back.
  Status on_rejoin(Session& session, uint64_t conn, const wire::RejoinMsg& rejoin);
  // Reads what the journal found at create(): floors for ids and epochs, and a restart.
  Status adopt_journal(std::unique_ptr<Journal> journal, const Journal::Found& found);
  void begin_recovery();
  void finish_recovery();
  std::chrono::milliseconds recovery_window() const;
  // The journal's ceilings cover the next id and `epoch` (journal.hpp); OK without a journal.
  Status cover_in_journal(uint64_t epoch);
  void on_link_failed(uint64_t conn, const Status& why);
  void drop_connection(uint64_t conn, const Status& why);
  void heartbeat_tick();
  // Round deadlines (deadlines.cpp): the arbiters' phases past their deadline, and the evictions
  // they call for; run from heartbeat_tick.
  void check_round_deadlines(Clock::time_point now);
  void check_gather_deadline(Clock::time_point now);
  void arm_round_timer(uint64_t epoch, Clock::time_point deadline);
  // A registration from an identity or a source address under back-off is refused with how long
  // it still lasts.
  Status check_backoff(const std::string& host, uint16_t port, const std::string& node,
                       const std::string& source) const;
  // The address peer `who`'s control connection comes from; empty if unknown.
  std::string source_of(PeerId who) const;
  void arm_heartbeat();
  std::chrono::milliseconds silence_check() const;  // the period of heartbeat_tick
  void publish_status();                            // on the strand
  // Every control message the master writes goes through here, so that sent_ counts it.
  void write(net::Link& link, const wire::ControlMessage& message, net::Link::Completion done = {});

  // Outbox
  void send(PeerId to, const wire::ControlMessage& message) override;
  void send_all(const std::vector<PeerId>& to, const wire::ControlMessage& message) override;
  void disconnect(PeerId who, const Status& why) override;
  void round_started(uint64_t epoch) override;
  void round_half_ready(uint64_t epoch) override;
  void misbehaved(PeerId who, const std::string& what, bool lied) override;
  void peer_forgotten(PeerId who) override;
  void group_reconfiguring(uint32_t group) override;
  void group_epoch_failed(uint32_t group) override;
  void peer_left(PeerId who, uint32_t group, const std::string& reason, bool graceful) override;

  runtime::IoRuntime& io_;
  const MasterOptions options_;
  std::shared_ptr<net::Listener> listener_;
  uint16_t port_ = 0;
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer heartbeat_timer_;
  Clock::time_point last_beat_{};  // when the last heartbeat went to every peer
  asio::steady_timer round_timer_;
  Clock::time_point round_started_at_{}, round_deadline_{};
  std::optional<Clock::time_point> gathering_since_;
  Penalties penalties_{options_.misbehaviour_backoff, std::chrono::minutes(10)};
  asio::steady_timer recovery_timer_;
  std::unique_ptr<Journal> journal_;
  Membership membership_{*this};
  StateArbiter state_{*this, membership_, options_.max_state_tensors, options_.state_pace};
  BatchArbiter batch_{*this, membership_, options_.evict_after_missed};
  NodeAgreement node_agreement_{*this, membership_};
  RunRecorder recorder_;
  StatusBox status_box_;
  SendCounters sent_;
  std::map<uint64_t, Session> sessions_;
  std::map<PeerId, uint64_t> by_peer_;
  uint64_t next_conn_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace longhaul::master
