// The control port: what the layers above the peer (the batch call, the sync engine, the node
// group, the state sync) need from the group's control plane, and nothing more. PeerSession
// implements it over the master link; tests/support/fake_group.hpp implements it in memory,
// scripting a master, as transport::InProcessLink stands in for a socket on the data port.
//
// The blocking calls (update_topology, decide, agree_in_node) are the group's agreement points:
// every member of the epoch makes the same sequence of them (docs/protocol.md). At most one
// blocking call runs at a time per member; the queries never block on the network and are
// thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.hpp"
#include "peer/topology.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::peer {

// A consistent snapshot of the committed epoch as this peer sees it.
struct TopologyView {
  uint64_t epoch = 0;  // 0 until admitted
  PeerId peer_id = 0;
  size_t world_size = 0;
  size_t group_world_size = 0;
  size_t rank = 0;  // own position in the group's ring
  size_t group_count = 0;
  std::vector<PeerId> ring;
};

// The group's decision on one attempt, the same on every member.
struct Decision {
  // Every member succeeded. The master decides all or nothing today.
  bool all_succeeded = false;
  // The members whose attempt the decision takes: the whole ring when all succeeded, nobody
  // otherwise. A master that decides with a quorum would name the subset here, and a
  // SettlePolicy::accept apply with it (settle.hpp).
  std::vector<PeerId> members;
};

// This member's outcome of one attempt, as it reports it to the master.
struct AttemptReport {
  bool ok = false;  // everything the attempt ran succeeded here
  // The attempt ran past this member's own deadline (an engine round's): the master counts the
  // members the others waited for, and evicts one the group waits for round after round
  // (batch_arbiter.hpp).
  bool late = false;
};

class GroupControl {
 public:
  virtual ~GroupControl() = default;

  // The committed epoch. Thread-safe; never blocks.
  virtual TopologyView view() const = 0;
  // Whether update_topology has work to do (a member lost, a joiner waiting); also true once the
  // group has failed, so a caller that re-forms only when this is set learns of the failure.
  virtual bool peers_pending() const = 0;
  // OK while this member works; afterwards why it stopped (removed, evicted, the master lost for
  // good). Thread-safe.
  virtual Status failure() const = 0;
  // Blocks until peers_pending() is true or `deadline` passes; returns peers_pending(). This
  // default polls every 10 ms; PeerSession wakes when the master's flag arrives. Thread-safe.
  virtual bool wait_for_pending(std::chrono::steady_clock::time_point deadline) const;

  // Re-forms the group: blocks until the master reports nothing to do or moves every member into a
  // new epoch (admitting joiners unless `admit_joiners` is false, without lost members). Every
  // active member must call it for a reconfiguration to happen.
  virtual Status update_topology(bool admit_joiners = true) = 0;
  // Reports this member's outcome of its next attempt in the current epoch (attempts count from 1
  // per epoch) and blocks until the group's decision. An error: this member no longer knows the
  // outcome and must not go on.
  virtual Result<Decision> decide(AttemptReport report) = 0;
  // Reports `flags` at this rail's next node agreement point of kind `kind` and blocks until every
  // rail of its node reached it; the OR of their flags. A member that is no rail of a node of
  // several rails gets `flags` back at once (docs/protocol.md, "Node agreement").
  virtual Result<uint32_t> agree_in_node(uint32_t kind, uint32_t flags) = 0;
  // Leaves the group at once without telling the master (it notices): a member that can no longer
  // take part (a node whose local group failed). Idempotent.
  virtual void close() = 0;

  // The state channel (state/sync.hpp): the master's state messages (STATE_PLAN,
  // STATE_SOURCE_LOST, STATE_COMPLETE) go to the handler, and the group's failure too. Must not
  // block. Empty: none is set.
  using StateHandler = std::function<void(Result<wire::ControlMessage> message)>;
  virtual void set_state_handler(StateHandler handler) = 0;
  // Queues a state message to the master. Thread-safe. LH_ERR_UNSUPPORTED when it is longer than a
  // control frame may be.
  virtual Status send_state_message(wire::ControlMessage message) = 0;
};

// Who hears when a member fails for good (removed, evicted, its master lost for good): called
// once, with the failure, on a library thread, after the member's collectives in flight were
// failed; never for a local close. Communicator implements it.
class FailureSignal {
 public:
  virtual ~FailureSignal() = default;
  // `listener` must not block. Returns an id for remove_failure_listener.
  using FailureListener = std::function<void(const Status& why)>;
  virtual uint64_t add_failure_listener(FailureListener listener) = 0;
  // Once it returns, the listener is not running and is not called again.
  virtual void remove_failure_listener(uint64_t id) = 0;
};

}  // namespace longhaul::peer
