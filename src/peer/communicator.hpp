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
#include "peer/batch.hpp"
#include "peer/collectives.hpp"
#include "peer/peer_stats.hpp"
#include "peer/session.hpp"
#include "peer/settle.hpp"
#include "runtime/runtime.hpp"

namespace longhaul::peer {

class Communicator final : public Collectives, public FailureSignal {
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

  // The session with the master, for the peer layer (src/peer) only: the layers above take its
  // control port, group().
  PeerSession& session() { return *session_; }
  // The control port (group.hpp): what the layers above need of the session.
  GroupControl& group() { return *session_; }

  // Collectives (collectives.hpp), over the committed epoch's ring. They fail at once with the
  // session's failure when the communicator is unusable, LH_ERR_CLOSED before admission and
  // after a leave (PeerSession::usable), and LH_ERR_UNSUPPORTED for the direct schedule without
  // full_mesh, whatever the group's size.
  collective::RingView ring_view() const override;
  Result<std::shared_ptr<collective::AllReduceOp>> allreduce(
      const collective::AllReduceSpec& spec) override;
  Result<std::shared_ptr<collective::GatherOp>> gather(const collective::GatherSpec& spec) override;
  collective::BufferPool& buffers() override { return engine_->buffers(); }

  // peer::allreduce_batch (batch.hpp) over this communicator's group and collectives.
  using BatchItem = peer::BatchItem;
  Status allreduce_batch(const std::vector<BatchItem>& items, collective::AllReduceSpec spec,
                         uint32_t max_attempts) {
    return peer::allreduce_batch(group(), *this, items, std::move(spec), max_attempts);
  }

  // A snapshot of the traffic counters: cumulative over the communicator's life, links that have
  // closed included. The six fields are read one after another, not as one atomic cut.
  // Thread-safe; never blocks.
  TrafficTotals traffic() const override;
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
  uint64_t add_failure_listener(FailureListener listener) override;
  // Once it returns, the listener is not running and is not called again.
  void remove_failure_listener(uint64_t id) override;

 private:
  Communicator() = default;
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
  // What every collective checks before it starts (see allreduce above).
  Status check_start(collective::Schedule schedule) const;
  Mutex handler_mu_;
  PeerSession::AbortHandler user_abort_handler_ GUARDED_BY(handler_mu_);
  // Held while a failure listener runs, so removing one waits for its call to end.
  Mutex listeners_mu_;
  std::vector<std::pair<uint64_t, FailureListener>> failure_listeners_ GUARDED_BY(listeners_mu_);
  uint64_t next_listener_id_ GUARDED_BY(listeners_mu_) = 1;
};

}  // namespace longhaul::peer
