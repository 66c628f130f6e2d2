// A master scripted in memory: members of peer groups in one process, each with the control port
// (peer::GroupControl, peer::FailureSignal), the data port (peer::Collectives: a collective engine
// over ring views whose links are fresh transport::InProcessLink pairs per epoch) and a
// shared-state sync (state::StateSync), as transport::InProcessLink stands in for a socket. No
// socket and no master thread: the members' calls do the master's work under one lock and block
// on one condition variable (each member has one worker thread, as a peer's runtime has).
//
// The semantics are the real master's (docs/protocol.md, src/master/membership.cpp,
// batch_arbiter.cpp, node_agreement.cpp, state_arbiter.cpp), with every message delivered at once:
// - update_topology answers "nothing to do" at once unless a member was lost, an attempt failed, or
//   an admissible joiner waits; then it blocks until every active member (of every group) waits,
//   and forms the next epoch without lost members, admitting the joiners only when every waiting
//   member allowed it. The first member of a group to wait aborts the group's collectives
//   (LH_ERR_ABORTED) and fails its undecided attempts.
// - decide reports the next attempt of the member's epoch (counted from 1) and blocks until every
//   active member of its group reported OK, or decides FAILED at once when one reported a failure
//   or the group's epoch failed (a member lost or waiting). A FAILED attempt ends the epoch.
// - peers_pending: an epoch to re-form, or an admissible joiner (not while a retry's re-formation
//   holds joiners back, until an attempt of the new epoch is decided); always once failed.
// - agree_in_node: rails of a node (one member per rail, each rail its own group) agree per point;
//   a member of no node (or of a node of one rail) gets its flags back at once. A rail lost
//   abruptly evicts its node (LH_ERR_NODE_EVICTED); a joining node is admissible once complete.
// - the state sync collects every active member's registry (a member lost is no longer waited
//   for), elects with state::elect (the popular content, a tie to the lowest peer id) and copies
//   the elected blocks into the others' registries, at the next revision. A member waiting in
//   update_topology refuses the syncs collecting reports (LH_ERR_ABORTED).
//
// Every blocking call ends when its member fails (killed, removed, evicted, closed) or the world is
// destroyed, and none waits longer than FakeWorldOptions::wait_limit: past it the call fails the
// test (ADD_FAILURE) and every later call of the world fails at once, and a collective still
// running after that long fails the test and is aborted (LH_ERR_TIMEOUT), so a bug shows as a
// failed test rather than a hung one. Thread-safe; the members' calls run on the test's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "collective/engine.hpp"
#include "peer/collectives.hpp"
#include "peer/group.hpp"
#include "runtime/worker_pool.hpp"
#include "state/election.hpp"
#include "state/sync.hpp"
#include "transport/inproc_link.hpp"

namespace longhaul::testing {

using peer::PeerId;

struct FakeWorldOptions {
  // The longest any call of the fake blocks, or any collective runs, before it fails the test.
  std::chrono::milliseconds wait_limit{15000};
  unsigned link_threads = 2;  // threads running the links' completions
};

// The node a member is a rail of; an empty name: a peer of no node.
struct FakeNode {
  std::string name;
  uint32_t rail = 0;
  uint32_t rails = 1;
};

class FakeWorld;

// One member: its control port, data port and state sync. Owned by its world; valid until the
// world is destroyed, also after it failed.
class FakeMember final : public peer::GroupControl,
                         public peer::FailureSignal,
                         public peer::Collectives,
                         public state::StateSync {
 public:
  FakeMember(FakeWorld& world, PeerId id);
  ~FakeMember() override;

  PeerId id() const { return id_; }
  // Blocks until the member is admitted (OK) or fails.
  Status connect();
  runtime::WorkerPool& workers() { return workers_; }
  collective::CollectiveEngine& engine() { return engine_; }

  // GroupControl.
  peer::TopologyView view() const override;
  bool peers_pending() const override;
  Status failure() const override;
  Status update_topology(bool admit_joiners = true) override;
  Result<peer::Decision> decide(peer::AttemptReport report) override;
  Result<uint32_t> agree_in_node(uint32_t kind, uint32_t flags) override;
  void close() override;
  void set_state_handler(StateHandler) override {}
  // The fake has no state channel: its StateSync is in memory.
  Status send_state_message(wire::ControlMessage) override;

  // FailureSignal.
  uint64_t add_failure_listener(FailureListener listener) override;
  void remove_failure_listener(uint64_t id) override;

  // Collectives.
  collective::RingView ring_view() const override;
  Result<std::shared_ptr<collective::AllReduceOp>> allreduce(
      const collective::AllReduceSpec& spec) override;
  Result<std::shared_ptr<collective::GatherOp>> gather(const collective::GatherSpec& spec) override;
  collective::BufferPool& buffers() override { return engine_.buffers(); }
  // The fake counts no bytes: zeros.
  peer::TrafficTotals traffic() const override { return {}; }

  // StateSync.
  Status sync(state::Registry& registry, wire::SyncStrategy strategy,
              state::SyncResult* result) override;

 private:
  friend class FakeWorld;
  void notify_failure(const Status& why);

  FakeWorld& world_;
  const PeerId id_;
  runtime::WorkerPool workers_{1};
  collective::CollectiveEngine engine_{workers_};
  std::mutex listeners_mu_;
  uint64_t next_listener_ = 1;
  std::vector<std::pair<uint64_t, FailureListener>> listeners_;
};

class FakeWorld {
 public:
  explicit FakeWorld(FakeWorldOptions options = {});
  // Ends every call still blocked (LH_ERR_CLOSED), waits until none runs, and fails every link.
  ~FakeWorld();
  FakeWorld(const FakeWorld&) = delete;
  FakeWorld& operator=(const FakeWorld&) = delete;

  // Registers `n` members of `group` and admits them in one epoch, as if they all registered
  // before the first round. Only while no member is active. Ids grow from 1 in join order.
  std::vector<FakeMember*> form(size_t n, uint32_t group = 0);
  // `nodes` nodes of `rails` rails each (rail r in group r), admitted in one epoch;
  // result[node][rail]. Node k is named "node<k>".
  std::vector<std::vector<FakeMember*>> form_nodes(size_t nodes, uint32_t rails);
  // Registers a joiner, pending until a round admits it (at once when no member is active).
  FakeMember& add(uint32_t group = 0, FakeNode node = {});
  FakeMember& member(PeerId id);

  // Faults. Each may be called from any thread, at any point (a report hook included).
  // The member's process dies: its links fail, the master loses it (ABORT LH_ERR_PEER_LOST to its
  // group, its node evicted), its blocking calls end with LH_ERR_PEER_LOST, its listeners run.
  void kill(PeerId id);
  // Kills `id` once its links have been given `sends` more sends (in this epoch or a later one):
  // that send and every later one is held, and the kill runs on a link thread.
  void kill_after_sends(PeerId id, size_t sends);
  // The master removes the member (REMOVED `why`): as kill, but its calls end with `why`.
  void remove(PeerId id, Status why);
  // A graceful leave: no ABORT, its group's undecided attempts fail, its links close.
  void leave(PeerId id);
  // A slow network: every send on every link, of this epoch and of later ones, reaches its
  // receiver about `delay` after it was posted (a timer per send releases what its link holds
  // then, so a send posted just before another's timer goes with it). 0: at once again. Not
  // together with kill_after_sends, which holds sends too.
  void delay_sends(std::chrono::milliseconds delay);
  // The member's next `n` reports (decide) say "failed" whatever its attempt did.
  void fail_reports(PeerId id, uint32_t n = 1);
  // Runs on the reporting member's thread before each report reaches the master (epoch, attempt
  // from 1, ok). It may call the world (kill a member). Empty: none.
  using ReportHook = std::function<void(PeerId id, uint64_t epoch, uint64_t attempt, bool ok)>;
  void on_report(ReportHook hook);

  // Observations.
  uint64_t epoch() const;        // the committed epoch (0: none yet)
  size_t epochs_formed() const;  // rounds committed
  size_t unchanged_answers() const;
  size_t decisions(bool ok) const;  // attempts decided so, over all groups and epochs
  std::vector<PeerId> ring(uint32_t group = 0) const;
  bool admitted(PeerId id) const;
  // Calls blocked in the world right now.
  size_t blocked_calls() const;
  // `from`'s end of its link to `to` in the committed epoch; null when there is none.
  std::shared_ptr<transport::InProcessLink> link(PeerId from, PeerId to) const;

 private:
  friend class FakeMember;
  struct Seat {
    std::unique_ptr<FakeMember> member;
    uint32_t group = 0;
    FakeNode node;
    enum class State { kPending, kActive, kGone } state = State::kPending;
    Status failure;        // OK while it works
    bool waiting = false;  // in update_topology
    bool admit_joiners = true;
    uint64_t attempt = 0;  // attempts reported in its epoch
    uint32_t forced_failures = 0;
    uint64_t node_point = 0;                              // node agreement points reached
    std::shared_ptr<std::atomic<int64_t>> sends_to_kill;  // kill_after_sends: sends left
    peer::TopologyView topo;
    collective::RingView view;
  };
  using State = Seat::State;
  struct Attempt {
    std::set<PeerId> reported;
    std::optional<bool> decision;
  };
  struct NodeRecord {
    uint32_t rails = 1;
    std::map<uint32_t, PeerId> registered;  // rail -> member
    struct Point {
      uint32_t kind = 0;
      uint32_t flags = 0;
      std::set<PeerId> reached;
    };
    std::map<uint64_t, Point> open;
    std::map<uint64_t, uint32_t> answers;  // point -> OR of the flags
  };
  struct StateRound {
    uint64_t epoch = 0;
    std::map<PeerId, state::Participant> reports;
    std::map<PeerId, std::shared_ptr<const std::vector<std::vector<std::byte>>>> content;
    std::optional<state::Election> election;
    Status refused;
  };
  using Lock = std::unique_lock<std::mutex>;
  using Notices = std::vector<std::pair<FakeMember*, Status>>;

  Seat& seat(PeerId id) const;
  Seat& enroll(Lock& lock, uint32_t group, FakeNode node);
  // Blocks until `done` (or the member fails, the world ends or breaks); the reason it stopped
  // early, or OK.
  Status wait(Lock& lock, Seat& s, const char* what, const std::function<bool()>& done);
  Status usable(const Seat& s) const;

  // The master's membership (fake_group.cpp).
  bool admissible(const Seat& s) const;
  bool reconfiguration_needed() const;
  bool pending_flag() const;
  size_t group_active(uint32_t group) const;
  size_t group_waiting(uint32_t group) const;
  void maybe_start_round();
  void commit(bool admit);
  void link_epoch();
  void arm_kill(Seat& s);
  void slow_down(const std::shared_ptr<transport::InProcessLink>& link);
  void abort_group(uint32_t group, lh_status code, const std::string& reason);
  void group_epoch_failed(uint32_t group);
  void decide_attempt(Attempt& a, bool ok);
  void forget(Seat& s, const Status& why, bool graceful, bool notify);
  void evict_node(const Seat& lost, const std::string& reason);
  void lose(PeerId id, const Status& why, bool graceful, bool notify);
  void flush(Lock& lock);
  // Aborts `op` and fails the test if it still runs after the wait limit.
  void watch(const std::shared_ptr<collective::Operation>& op, PeerId id);

  // The members' calls.
  Status update_topology(Seat& s, bool admit_joiners);
  Result<peer::Decision> decide(Seat& s, peer::AttemptReport report);
  Result<uint32_t> agree_in_node(Seat& s, uint32_t kind, uint32_t flags);
  Status sync_state(Seat& s, state::Registry& registry, wire::SyncStrategy strategy,
                    state::SyncResult* result);
  // The state sync's rounds (fake_group_state.cpp).
  void maybe_plan(uint32_t group);
  void refuse_state_round(uint32_t group, const Status& why);

  const FakeWorldOptions options_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> link_threads_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<PeerId, std::unique_ptr<Seat>> seats_;
  PeerId next_id_ = 1;
  uint64_t epoch_ = 0;
  bool ring_broken_ = false;
  bool joiners_held_ = false;
  std::map<uint32_t, std::vector<PeerId>> rings_;
  std::map<std::pair<PeerId, PeerId>, std::shared_ptr<transport::InProcessLink>> links_;
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, std::unique_ptr<Attempt>> attempts_;
  std::map<uint32_t, uint64_t> failed_epoch_;  // group -> its epoch whose operations failed
  std::map<std::string, std::unique_ptr<NodeRecord>> nodes_;
  std::map<uint32_t, std::shared_ptr<StateRound>> state_rounds_;
  std::map<uint32_t, uint64_t> last_revision_;  // group -> revision of its last completed sync
  ReportHook report_hook_;
  Notices notices_;  // failure listeners to run once the lock is released
  size_t epochs_formed_ = 0, unchanged_ = 0, decided_ok_ = 0, decided_failed_ = 0;
  std::vector<std::weak_ptr<asio::steady_timer>> watchdogs_;
  size_t in_calls_ = 0;
  bool closing_ = false;
  Status broken_;  // a call waited past the limit: every call fails from then on
  std::chrono::milliseconds send_delay_{0};  // delay_sends
};

// Runs body(i) for i in [0, n) on n threads and joins them.
void in_parallel(size_t n, const std::function<void(size_t)>& body);

}  // namespace longhaul::testing
