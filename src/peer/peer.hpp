// A peer: the composition root of one member's services. It owns, in the order they are built,
// the runtime (I/O threads and the worker pool), the communicator (the session with the master,
// the mesh, the collective engine), the staged collectives (staged_ops.hpp: the collectives on a
// caller's buffers, device memory staged as they need), the block server and the shared-state
// sync, and hands the layers above the narrow ports they take: the control port (GroupControl),
// the collectives, the failure signal, the state sync and the workers. The C API's lh_comm is one
// Peer; its lh_local_group is a StagedNodeGroup formed over one (staged_node_group.hpp), and its
// lh_state a StagedState (staged_state.hpp).
//
// Destruction runs in reverse: the state sync, the block server (it stops serving and waits for
// its sends), the staged collectives, the communicator (closes the session, fails the collectives
// in flight), and the runtime last (joins the workers, then the I/O threads), once nothing that
// posts to it is left. Must not be destroyed on one of its own runtime's threads.
//
// Threads: the ports are as thread-safe as their own headers say; Peer adds no state of its own.
#pragma once

#include <memory>
#include <string>

#include "peer/communicator.hpp"
#include "peer/options.hpp"
#include "peer/staged_ops.hpp"
#include "runtime/runtime.hpp"
#include "state/block_server.hpp"
#include "state/sync.hpp"
#include "sync/options.hpp"

namespace longhaul::sync {
class SyncEngine;
}  // namespace longhaul::sync

namespace longhaul::peer {

class Peer {
 public:
  // Validates `options` (the node's fields too) and builds the services; nothing is sent until
  // connect(). Errors: LH_ERR_INVALID_ARGUMENT for bad options, the listener's bind failure.
  static Result<std::unique_ptr<Peer>> create(const CommunicatorOptions& options,
                                              const runtime::RuntimeOptions& runtime = {});
  ~Peer();
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // Registers with the master and blocks until admitted (PeerSession::connect), then until the
  // group has options().min_peers members (wait_for_peers.hpp), all within connect_timeout.
  Status connect();
  // Blocks until the group has `n` members or `timeout` passes (wait_for_peers.hpp); LH_ERR_CLOSED
  // unless usable().
  Status wait_for_peers(size_t n, std::chrono::milliseconds timeout);
  // OK while the communicator may run collectives; LH_ERR_CLOSED before admission and after
  // leave(), the session's failure once it failed (PeerSession::usable).
  Status usable() const { return comm_->session().usable(); }
  // Announces the leave and waits (bounded) for the master's acknowledgement, then closes.
  Status leave(const std::string& reason) { return comm_->session().leave(reason); }
  // Aborts seen and the data listener's port, for the C API's attributes.
  uint64_t aborts_seen() const { return comm_->session().aborts_seen(); }
  uint16_t listen_port() const { return comm_->session().listen_port(); }
  const CommunicatorOptions& options() const { return comm_->session().options(); }

  // The ports.
  GroupControl& group() { return comm_->group(); }
  Collectives& collectives() { return *comm_; }
  FailureSignal& failures() { return *comm_; }
  state::StateSync& state_sync() { return *state_sync_; }
  runtime::WorkerPool& workers() { return runtime_->workers(); }
  StatsBoard& stats_board() { return comm_->stats_board(); }
  // The whole communicator (traffic, the abort handler).
  Communicator& communicator() { return *comm_; }
  // The collectives on a caller's buffers, device memory staged through pinned host slots.
  StagedOps& staged() { return *staged_; }
  // Starts a sync engine (sync/engine.hpp) over this peer's services. A range whose data is
  // device memory (detected, or every range where `declared` is kCuda) is reached through the GPU
  // layer's pinned mirror (gpu/param_copies.hpp). Errors: SyncEngine::start's.
  Result<std::unique_ptr<sync::SyncEngine>> start_sync_engine(sync::EngineOptions options,
                                                              gpu::Memory declared);

 private:
  Peer() = default;
  // Declared in the order they are built: destruction runs in reverse (see the top of this file).
  std::unique_ptr<runtime::Runtime> runtime_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<StagedOps> staged_;
  std::shared_ptr<state::BlockServer> block_server_;
  std::unique_ptr<state::GroupStateSync> state_sync_;
};

}  // namespace longhaul::peer
