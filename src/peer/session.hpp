// A peer's session with the master: registration, heartbeats in both directions, the
// update_topology rounds, the peers-pending flag, aborts pushed by the master, and leaving.
//
// The session runs on one strand; the blocking calls (connect, update_topology, decide_batch,
// agree_in_node, leave) post to it and wait for the answer on the caller's thread. At most one
// blocking call may run at a time; the queries (peers_pending, view, ring_links, aborts_seen) are
// thread-safe and never block on the network.
//
// Failure: a REMOVED from the master, a batch decision that does not come within
// kBatchDecisionTimeout, or a protocol violation ends the session: every later call returns that
// Status, and the abort handler runs with it (in-flight collectives must end). Losing the master
// (its link closes or it is silent for heartbeat_misses intervals) ends the session too before
// admission, or with master_reconnect_timeout 0. Once admitted, the session instead keeps its
// epoch, ring and data links, runs the master-lost handler once with LH_ERR_ABORTED (the engine
// refuses new collectives of this epoch; those in flight run to their end), and reconnects with
// backoff (session_reconnect.cpp). Meanwhile update_topology, decide_batch and agree_in_node wait
// for the master, a state sync fails with LH_ERR_ABORTED, and peers_pending() is true. Back, it
// REJOINs with its view of the run and resumes the call in progress; the master then re-forms
// every group in an epoch newer than any reported. Not back within the timeout, the session
// fails with LH_ERR_PEER_LOST.
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <initializer_list>
#include <memory>
#include <optional>

#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "common/mutex.hpp"
#include "net/endpoint.hpp"
#include "net/traffic.hpp"
#include "peer/group.hpp"
#include "peer/mesh.hpp"
#include "peer/options.hpp"
#include "peer/topology.hpp"

namespace longhaul::peer {

// The master decides a batch attempt once the slowest member finished its all-reduces, or at once
// when one failed or a member is lost (heartbeats, by default within 3 s). So this bounds only
// all-reduces that make no progress and are never aborted; generous for slow links and large
// batches.
inline constexpr std::chrono::milliseconds kBatchDecisionTimeout{std::chrono::minutes(10)};

class PeerSession final : public GroupControl, public std::enable_shared_from_this<PeerSession> {
 public:
  using Clock = std::chrono::steady_clock;
  // Runs on the session strand when the master aborts the group's in-flight operations of
  // `epoch` (LH_ERR_PEER_LOST with the reason when a member was lost, LH_ERR_ABORTED when the
  // group only reconfigures), and once with the session's failure when the
  // session fails (not when it is closed or left locally). Must not block.
  using AbortHandler = std::function<void(uint64_t epoch, const Status& why)>;

  // Validates the options and binds the data listener. `io` must outlive the session. The link to
  // the master counts its frames into `control_traffic`, the mesh's data links into
  // `data_traffic` (Mesh::create); null counts nothing.
  static Result<std::shared_ptr<PeerSession>> create(
      runtime::IoRuntime& io, const CommunicatorOptions& options,
      std::shared_ptr<net::TrafficCounter> control_traffic = nullptr,
      std::shared_ptr<net::TrafficCounter> data_traffic = nullptr);
  ~PeerSession();

  void set_abort_handler(AbortHandler handler);
  // Runs on the session strand when an admitted session loses its master and starts reconnecting
  // (with the epoch it keeps and LH_ERR_ABORTED): the collectives must refuse new operations of
  // that epoch but let those in flight run to their end (CollectiveEngine::close_epoch). Must not
  // block.
  void set_master_lost_handler(AbortHandler handler);

  // The shared-state sync (state/sync.hpp) talks to the master through the session. The master's
  // state messages (STATE_PLAN, STATE_SOURCE_LOST, STATE_COMPLETE) go to the state handler on the
  // session strand (a STATE_SOURCE_LOST that arrives with no handler set is dropped);
  // when the session fails (or is closed) the handler gets that Status instead. Must not block.
  void set_state_handler(StateHandler handler) override;
  // Queues a state message to the master. Thread-safe. The session's failure if it has failed,
  // LH_ERR_INVALID_ARGUMENT unless admitted and not in another blocking call, LH_ERR_UNSUPPORTED
  // when the message is longer than a control frame may be (TransportOptions::limits, 16 MiB).
  Status send_state_message(wire::ControlMessage message) override;
  // Asks the master to abort this member's group's collectives of `epoch` (ABORT_REQUEST): one of
  // its own timed out, and the others may be waiting for its part. Queued; dropped unless the
  // session is active in `epoch`. Thread-safe; never blocks.
  void request_abort(uint64_t epoch, const std::string& reason);
  // Once admitted, every heartbeat also sends the master what `source` returns for the committed
  // ring's links (PEER_STATS, peer_stats.hpp). Runs on the session strand; must not block. Empty:
  // none is sent. Thread-safe.
  using StatsSource = std::function<wire::PeerStatsMsg(const RingLinks& links)>;
  void set_stats_source(StatsSource source);
  // Inbound service links (Mesh::ServiceHandler) go to `handler`. Thread-safe.
  void set_service_handler(Mesh::ServiceHandler handler);
  runtime::IoRuntime& io() { return io_; }
  const CommunicatorOptions& options() const { return options_; }

  // Connects to the master, registers and blocks until admitted into an epoch (or the connect
  // timeout passes, which ends the session with LH_ERR_TIMEOUT).
  Status connect();
  // Blocks until the master either reports nothing to do or moves everyone into a new epoch
  // (admitting waiting peers, re-forming the ring without lost ones). Every active peer must call
  // it for a reconfiguration to happen. `admit_joiners` false (a batch retry follows at once): the
  // new epoch admits no waiting peer; they stay pending (docs/protocol.md).
  Status update_topology(bool admit_joiners = true) override;
  // Reports this member's outcome of its next batch attempt in the current epoch (attempts count
  // from 1 per epoch; every member of an epoch runs the same ones) and blocks until the master
  // decides the group's outcome: true when every member succeeded, false when the attempt failed
  // somewhere. Not deciding within kBatchDecisionTimeout ends the session with LH_ERR_TIMEOUT
  // (this member no longer knows the outcome, so it must not go on).
  Result<bool> decide_batch(bool ok, bool late = false);
  // GroupControl: decide_batch's answer as a Decision (the whole ring, or nobody).
  Result<Decision> decide(AttemptReport report) override;
  // A rank of a node of several rails: reports `flags` at this rail's next agreement point, of
  // kind `kind` (the caller's: what the point is), and blocks until every rail of the node has
  // reached that point; returns the OR of all their flags (docs/protocol.md, "Node agreement").
  // Every rail of the node must make the same sequence of calls; the master evicts a node whose
  // rails reach one point with different kinds. A peer that is no rail of a node of several
  // rails gets `flags` back at once. No timeout, as in update_topology (a sibling may be retrying
  // a round over a slow network): a sibling lost ends the wait by the node's eviction
  // (LH_ERR_NODE_EVICTED). Losing the master, the call waits for it and reports again once back.
  Result<uint32_t> agree_in_node(uint32_t kind, uint32_t flags) override;
  // Announces the leave and waits (bounded) for the master's acknowledgement, then closes.
  Status leave(const std::string& reason);
  // Closes everything without telling the master (it notices the closed socket). Idempotent.
  void close() override;

  // Whether update_topology has work to do; also true once the session has failed, so that a loop
  // that calls update_topology only when this is set learns of the failure from that call.
  bool peers_pending() const override { return pending_.load() || failed_.load(); }
  // Wakes when the master's pending flag arrives or the session fails.
  bool wait_for_pending(Clock::time_point deadline) const override;
  // OK while the communicator may run collectives: admitted, not left, not failed. Otherwise
  // failure() when the session failed, else LH_ERR_CLOSED saying why (never connected, or left).
  // Thread-safe.
  Status usable() const;
  TopologyView view() const override;
  RingLinks ring_links() const { return mesh_->ring_links(); }
  uint64_t aborts_seen() const { return aborts_.load(); }
  // The port the data listener is bound to (fixed at create).
  uint16_t listen_port() const { return mesh_->port(); }
  // OK while the session works.
  Status failure() const override;

 private:
  void report_failed_links();  // on the strand, before UPDATE_TOPOLOGY
  enum class State {
    kIdle,
    kRegistering,
    kJoining,
    kActive,
    kUpdating,
    kLinking,
    kLeaving,
    kLeft,
    kFailed,
    kReconnecting,  // admitted, the master lost: connecting again (session_reconnect.cpp)
    kRejoining,     // connected again, REJOIN sent, waiting for WELCOME
  };
  using Strand = asio::strand<asio::io_context::executor_type>;

  PeerSession(runtime::IoRuntime& io, const CommunicatorOptions& options, Strand strand,
              std::shared_ptr<Mesh> mesh, std::string master_host, uint16_t master_port,
              std::shared_ptr<net::TrafficCounter> control_traffic);

  // Posts `start` to the strand and waits for the call it begins to complete.
  Status run_call(std::function<void()> start, std::optional<std::chrono::milliseconds> timeout,
                  const char* what);
  void complete_call(Status s);
  // A call that reports to the master and waits for its answer (decide_batch, agree_in_node):
  // `record` runs on the strand once the call may go ahead, stores what the answer needs, and
  // returns the report; refused unless admitted; while the master is away the report waits for
  // it (resume_after_rejoin sends it again). Bounded by `timeout` when set.
  Status report_and_wait(std::function<wire::ControlMessage()> record,
                         std::optional<std::chrono::milliseconds> timeout, const char* what);
  void on_master_link(Result<std::shared_ptr<net::Link>> result);
  // Starts reading the (new) master link: messages to on_master_message, its failure to
  // lose_master (or, while leaving, to the end of the leave).
  void attach_master_link(std::shared_ptr<net::Link> link);
  void async_connect_master();
  // The master's link closed or the master went silent (session_reconnect.cpp): reconnect when
  // admitted and allowed, otherwise fail with `why`.
  void lose_master(Status why);
  void reconnect_after(std::chrono::milliseconds delay);
  // Registering, the master said "retry later" (its per-address handshake cap): connect again
  // after a jittered, doubling backoff; connect_timeout still bounds the whole connect.
  void register_again_later(const Status& why);
  void on_reconnect(Result<std::shared_ptr<net::Link>> result);
  wire::RejoinMsg rejoin_report() const;
  // WELCOME after REJOIN: resume the state the master was lost in and the call in progress.
  Status resume_after_rejoin(const wire::WelcomeMsg& welcome);
  void on_master_message(const std::vector<std::byte>& bytes);
  // Sends each message the master may send a peer to its one handler below; any other type is a
  // protocol violation. A handler's first lines check the states the message is legal in; a
  // non-OK Status from it ends the session.
  Status handle(wire::ControlMessage message);
  Status on(const wire::WelcomeMsg& welcome);
  Status on(const wire::HeartbeatMsg& heartbeat);
  Status on(const wire::TopologyUnchangedMsg& unchanged);
  Status on(const wire::TopologyMsg& proposal);
  Status on(const wire::EpochCommitMsg& commit);
  Status on(const wire::AbortMsg& abort);
  Status on(const wire::BatchDecisionMsg& decision);
  Status on(const wire::NodeAgreedMsg& agreed);
  Status on(const wire::PendingChangedMsg& pending);
  Status on(const wire::ByeMsg& bye);
  Status on(const wire::RemovedMsg& removed);
  Status on(wire::StatePlanMsg&& plan);
  Status on(wire::StateCompleteMsg&& complete);
  Status on(wire::StateSourceLostMsg&& source_lost);
  Status on(const wire::NodeWaitingMsg& waiting);
  // OK in one of the `legal` states; otherwise unexpected(type).
  Status expect_state(wire::ControlType type, std::initializer_list<State> legal) const;
  // The protocol error for a message of `type` that the current state does not allow.
  Status unexpected(wire::ControlType type) const;
  // Hands a state message to the state handler; without one, the message is a protocol error.
  Status forward_to_state_sync(wire::ControlMessage message);
  StateHandler state_handler() const EXCLUDES(mu_);  // a copy
  void send(const wire::ControlMessage& m);
  void fail(Status why);
  // Stores the master's pending flag and wakes wait_for_pending.
  void set_pending(bool pending);
  // Closes the master link and the mesh; the mesh's links fail with `why`.
  void shutdown_network(const Status& why = closed_error("communicator closed"));
  void arm_heartbeat();
  void publish_view(const Topology& t);

  runtime::IoRuntime& io_;
  const CommunicatorOptions options_;
  Strand strand_;
  std::shared_ptr<Mesh> mesh_;
  std::string master_host_;
  uint16_t master_port_;
  const std::shared_ptr<net::TrafficCounter> control_traffic_;
  asio::steady_timer heartbeat_timer_;

  // Strand state.
  State state_ = State::kIdle;
  std::shared_ptr<net::Link> master_;
  PeerId id_ = 0;
  std::string advertised_host_;  // as registered (REGISTER), for a REJOIN
  uint16_t advertised_port_ = 0;
  uint64_t epoch_ = 0;
  std::optional<Topology> proposal_;
  std::optional<Topology> committed_;  // the committed epoch, once admitted
  std::chrono::milliseconds heartbeat_interval_{1000};
  uint32_t heartbeat_misses_ = 3;
  Clock::time_point last_heard_;
  std::shared_ptr<std::promise<Status>> call_;
  // While this rank's node is incomplete, which rails it still waits for (NODE_WAITING); a
  // connect that times out says so.
  std::string node_waiting_;
  uint64_t batch_attempt_ = 0;            // batch reports sent in the current epoch
  std::shared_ptr<bool> batch_decision_;  // set while decide_batch waits for attempt batch_attempt_
  bool batch_ok_ = false;                 // what the report of batch_attempt_ said
  bool batch_late_ = false;               // and whether it ran past this member's deadline
  uint64_t decided_attempt_ = 0;          // the last attempt of the epoch decided, 0 if none
  bool decided_ok_ = false;
  uint64_t node_point_ = 0;                  // node agreement points reached
  std::shared_ptr<uint32_t> node_agreed_;    // set while agree_in_node waits for node_point_
  uint32_t node_kind_ = 0, node_flags_ = 0;  // what this rail reported at node_point_
  uint32_t node_answer_ = 0;  // its last answer: to node_point_ (node_point_ - 1 while waiting)
  // Reconnecting (session_reconnect.cpp): the state to resume after REJOIN (kActive or kUpdating),
  // the admit flag of an update_topology in progress, the proposal that was being linked when the
  // master was lost, the deadline and the next backoff.
  State resume_ = State::kActive;
  bool update_admit_ = true;
  std::optional<Topology> lost_proposal_;
  Clock::time_point reconnect_deadline_;
  std::chrono::milliseconds backoff_{0};
  Status last_loss_;
  asio::steady_timer reconnect_timer_;

  std::atomic<bool> pending_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> left_{false};  // leave() ran: usable() says so
  // wait_for_pending sleeps here; set_pending and fail wake it.
  mutable Mutex pending_mu_;
  mutable CondVar pending_changed_;
  std::atomic<bool> master_away_{false};
  std::atomic<uint64_t> aborts_{0};
  mutable Mutex mu_;
  TopologyView view_ GUARDED_BY(mu_);
  Status failure_ GUARDED_BY(mu_);
  AbortHandler on_abort_ GUARDED_BY(mu_);
  AbortHandler on_master_lost_ GUARDED_BY(mu_);
  StateHandler on_state_ GUARDED_BY(mu_);
  StatsSource stats_source_ GUARDED_BY(mu_);
};

}  // namespace longhaul::peer
