// A peer's communicator: a PeerSession and the collective engine that runs all-reduces over the
// session's links, both driven by a runtime::Runtime the caller owns. This is the object the C
// API's lh_comm wraps (lh_comm owns the runtime and the state sync's block server beside it).
//
// It also owns the communicator's three traffic counters (net/traffic.hpp), which the services
// that open or accept its links count into: data (the mesh's links to the group members, which
// the collectives use), control (the session's link to the master) and state (the state sync's
// links: the fetcher's outbound ones and the block server's inbound service links; lh_comm gives
// state_traffic() to its block server, state::sync_state to each fetch).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "collective/engine.hpp"
#include "common/mutex.hpp"
#include "net/traffic.hpp"
#include "peer/peer_stats.hpp"
#include "peer/session.hpp"
#include "runtime/runtime.hpp"

namespace longhaul::peer {

// Bytes the communicator's links have written (sent) and read (received) since it was created,
// frame headers included, by kind of link (see Communicator). Each field only grows.
struct TrafficTotals {
  uint64_t data_sent = 0;
  uint64_t data_received = 0;
  uint64_t control_sent = 0;
  uint64_t control_received = 0;
  uint64_t state_sent = 0;
  uint64_t state_received = 0;
};

// A collective's failure that the group mends by re-forming its ring (update_topology) and
// trying again: a peer or link lost, or the operation aborted.
bool retryable(const Status& s);

class Communicator {
 public:
  // The session runs on runtime.io(). `runtime` must outlive the communicator.
  static Result<std::unique_ptr<Communicator>> create(const CommunicatorOptions& options,
                                                      runtime::Runtime& runtime);
  // Closes the session (without a graceful leave) and fails the collectives in flight; once it
  // returns no handler of the session calls into this object. The runtime keeps running (it may
  // still run handlers that hold the session's last references). Must not run on one of the
  // runtime's I/O threads: it waits for the session's strand.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  PeerSession& session() { return *session_; }
  collective::CollectiveEngine& collectives() { return *engine_; }

  // The committed epoch's ring as the collectives see it.
  collective::RingView ring_view() const;
  // Starts an all-reduce over the current epoch's ring (see collective::AllReduceSpec). Fails at
  // once with the session's failure when the communicator is unusable.
  Result<std::shared_ptr<collective::AllReduceOp>> allreduce(const collective::AllReduceSpec& spec);
  // Starts an all-gather, a broadcast or a barrier (collective::GatherSpec) likewise.
  Result<std::shared_ptr<collective::GatherOp>> gather(const collective::GatherSpec& spec);

  // One all-reduce of a batch: spec.input/output/count as in AllReduceSpec.
  struct BatchItem {
    const void* input = nullptr;
    void* output = nullptr;
    size_t count = 0;
  };
  // Runs every item with `spec`'s type, op and codec, all in flight at once, all or nothing. After
  // each attempt every member reports its outcome to the master, which decides for the whole
  // group (OK once every member succeeded; FAILED as soon as one failed or a member is lost, leaves
  // or waits in update_topology). On FAILED every member restores its inputs (and residual), calls
  // update_topology without admitting joiners, and retries on the new ring, up to max_attempts
  // attempts. Returns OK exactly when every member of the group returns OK, with the results; on
  // any error the inputs (and residual) are as they were on entry. See docs/collectives.md.
  Status allreduce_batch(const std::vector<BatchItem>& items, collective::AllReduceSpec spec,
                         uint32_t max_attempts);

  // A snapshot of the traffic counters: cumulative over the communicator's life, links that have
  // closed included. The six fields are read one after another, not as one atomic cut.
  // Thread-safe; never blocks.
  TrafficTotals traffic() const;
  // The counter the state sync's links count into (state::BlockServer, state::FetchOptions).
  const std::shared_ptr<net::TrafficCounter>& state_traffic() const { return state_traffic_; }

  // Where the layers above post their progress for the master's status page (PEER_STATS).
  StatsBoard& stats_board() { return *stats_board_; }

  // The master's aborts fail every collective in flight first, then reach `handler` (which may
  // be empty). Runs on a library thread; must not block.
  void set_abort_handler(PeerSession::AbortHandler handler);

  // Calls `listener` once, with the session's failure, when the communicator fails for good (the
  // master removed this peer, LH_ERR_NODE_EVICTED among other reasons, or was lost for good), on
  // a library thread, after the collectives in flight were failed; never for a local close. The
  // node-local groups hang here (node/node_group.hpp): a dead sibling's rank must not leave
  // the others waiting. Returns an id for remove_failure_listener. Must not block.
  using FailureListener = std::function<void(const Status& why)>;
  uint64_t add_failure_listener(FailureListener listener);
  // Once it returns, the listener is not running and is not called again.
  void remove_failure_listener(uint64_t id);

 private:
  Communicator() = default;
  // Starts every item's all-reduce and waits for all of them; the first failure.
  Status run_batch_attempt(const std::vector<BatchItem>& items,
                           const collective::AllReduceSpec& spec);
  // Created with the communicator and never replaced: links hold them as long as they live.
  const std::shared_ptr<net::TrafficCounter> data_traffic_ =
      std::make_shared<net::TrafficCounter>();
  const std::shared_ptr<net::TrafficCounter> control_traffic_ =
      std::make_shared<net::TrafficCounter>();
  const std::shared_ptr<net::TrafficCounter> state_traffic_ =
      std::make_shared<net::TrafficCounter>();
  const std::shared_ptr<StatsBoard> stats_board_ = std::make_shared<StatsBoard>();
  std::unique_ptr<collective::CollectiveEngine> engine_;
  std::shared_ptr<PeerSession> session_;
  // Runs the failure listeners when the session has failed (called from the abort handler).
  void notify_failure_listeners();
  Mutex handler_mu_;
  PeerSession::AbortHandler user_abort_handler_ GUARDED_BY(handler_mu_);
  // Held while a failure listener runs, so removing one waits for its call to end.
  Mutex listeners_mu_;
  std::vector<std::pair<uint64_t, FailureListener>> failure_listeners_ GUARDED_BY(listeners_mu_);
  uint64_t next_listener_id_ GUARDED_BY(listeners_mu_) = 1;
};

}  // namespace longhaul::peer
