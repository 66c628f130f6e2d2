// A member that knows the secret and misbehaves, for the hostile tests: it speaks the control
// protocol to a real master over a real socket (registering, heartbeating, answering proposals
// as its policy says) and accepts its neighbours' data links on a real listener, answering their
// PEER_HELLO so that they count the link as set up, and (by default) it comes to update_topology as
// an honest member does. What it does wrong is up to the test: stay
// silent where an answer is due, or send claims an honest peer would not. It keeps the shared-state
// sync's answers (STATE_PLAN, STATE_COMPLETE) for a test that plays that sync by hand.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/endpoint.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::testing {

class RogueMember {
 public:
  struct Policy {
    // Answer a proposal with LINKS_READY (false: link, but never confirm).
    bool confirm_links = true;
    // Come to update_topology when a change is pending or the group aborted (false: never).
    bool come_to_update = true;
    // Open the data links this member is to open (false: never connect to a neighbour).
    bool open_links = true;
    // Added to every LINKS_READY: what to name unreachable, given the proposal.
    std::function<std::vector<uint64_t>(const wire::TopologyMsg&, uint64_t self)> unreachable;
  };

  RogueMember(uint16_t master_port, Policy policy);
  ~RogueMember();

  // Registers (REGISTER naming `data_port`, by default its own listener's); the master's answer
  // arrives later.
  void register_with_master(std::optional<uint16_t> data_port = std::nullopt);
  uint16_t data_port() const { return listener_ ? listener_->port() : 0; }
  // Waits for WELCOME; the peer id, or 0.
  uint64_t wait_id(std::chrono::milliseconds timeout);
  // Waits until an EPOCH_COMMIT admits it (true) or the master removes it (false).
  bool wait_admitted(std::chrono::milliseconds timeout);
  // Waits for REMOVED; its reason, or nullopt on timeout (or a link that closed without one).
  std::optional<std::string> wait_removed(std::chrono::milliseconds timeout);
  uint64_t epoch() const;
  // The last whole proposal this member received (the first round that admitted it).
  std::optional<wire::TopologyMsg> last_proposal() const;
  void send(const wire::ControlMessage& message);
  // The first STATE_PLAN not taken yet; nullopt on timeout, removal or a closed link.
  std::optional<wire::StatePlanMsg> wait_plan(std::chrono::milliseconds timeout);
  // Waits for a STATE_COMPLETE not taken yet.
  bool wait_complete(std::chrono::milliseconds timeout);
  // Closes everything (as a crash would, with no LEAVE).
  void close();

 private:
  // What the I/O threads' handlers touch: shared with them, so that none outlives it.
  struct State : std::enable_shared_from_this<State> {
    Policy policy;
    std::shared_ptr<net::Link> control;
    std::mutex mu;
    std::condition_variable cv;
    uint64_t id = 0, epoch = 0;
    bool waiting = false;  // in update_topology
    std::optional<std::string> removed;
    bool closed = false;
    std::vector<wire::StatePlanMsg> plans;  // not taken yet
    size_t completes = 0;                   // not taken yet
    runtime::IoRuntime* io = nullptr;
    // The run as the last proposal (whole, or a change applied) has it: group 0 only.
    std::optional<wire::TopologyMsg> proposal;
    std::vector<std::shared_ptr<net::Link>> data_links;
    std::map<uint64_t, std::shared_ptr<net::Link>> outbound;  // to neighbours with larger ids

    void send(const wire::ControlMessage& message);
    void on_control(const std::vector<std::byte>& bytes);
    // Sends UPDATE_TOPOLOGY unless it waits already (mu held; unlocks it to send).
    void update_topology(std::unique_lock<std::mutex>& lock);
    void on_data_link(std::shared_ptr<net::Link> link);
    // Applies a proposal (a change to the one before, or whole) to `proposal`.
    void apply(const wire::TopologyMsg& topology);
    // Of each pair of neighbours the smaller id connects and says hello (peer/mesh.hpp).
    void link_to_neighbours(uint64_t epoch);
  };
  void heartbeat_loop();

  runtime::IoRuntime io_{2};
  std::shared_ptr<State> s_ = std::make_shared<State>();
  std::shared_ptr<net::Listener> listener_;
  std::thread heartbeats_;
};

}  // namespace longhaul::testing
