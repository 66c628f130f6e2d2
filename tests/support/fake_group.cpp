// The fake world's membership, decisions and node agreement: the master's side. Its members
// (fake_member.cpp) call in here; the state sync's rounds are in fake_group_state.cpp.
#include "fake_group.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace longhaul::testing {

// ---- The world.

FakeWorld::FakeWorld(FakeWorldOptions options)
    : options_(options), work_(asio::make_work_guard(io_)) {
  for (unsigned i = 0; i < std::max(1u, options_.link_threads); ++i)
    link_threads_.emplace_back([this] { io_.run(); });
}

FakeWorld::~FakeWorld() {
  {
    Lock lock(mu_);
    closing_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return in_calls_ == 0; });
    for (auto& [ends, link] : links_) link->fail(closed_error("the fake world ended"));
    links_.clear();
  }
  for (auto& [id, s] : seats_) s->member->engine().abort_all(closed_error("the fake world ended"));
  for (auto& watchdog : watchdogs_)
    if (auto timer = watchdog.lock()) timer->cancel();
  work_.reset();
  for (auto& t : link_threads_) t.join();  // after the completions still queued
  seats_.clear();
}

FakeWorld::Seat& FakeWorld::seat(PeerId id) const {
  return *seats_.at(id);
}

FakeMember& FakeWorld::member(PeerId id) {
  Lock lock(mu_);
  return *seat(id).member;
}

FakeWorld::Seat& FakeWorld::enroll(Lock&, uint32_t group, FakeNode node) {
  const PeerId id = next_id_++;
  auto s = std::make_unique<Seat>();
  s->member = std::make_unique<FakeMember>(*this, id);
  s->group = group;
  s->node = node;
  s->topo.peer_id = id;
  if (node.rails > 1) {
    auto& record = nodes_[node.name];
    if (!record) record = std::make_unique<NodeRecord>();
    record->rails = node.rails;
    EXPECT_FALSE(record->registered.contains(node.rail)) << "rail registered twice";
    record->registered[node.rail] = id;
  }
  return *seats_.emplace(id, std::move(s)).first->second;
}

std::vector<FakeMember*> FakeWorld::form(size_t n, uint32_t group) {
  Lock lock(mu_);
  EXPECT_EQ(epochs_formed_, 0u) << "form() starts a world";
  std::vector<FakeMember*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(enroll(lock, group, {}).member.get());
  maybe_start_round();
  cv_.notify_all();
  return out;
}

std::vector<std::vector<FakeMember*>> FakeWorld::form_nodes(size_t nodes, uint32_t rails) {
  Lock lock(mu_);
  EXPECT_EQ(epochs_formed_, 0u) << "form_nodes() starts a world";
  std::vector<std::vector<FakeMember*>> out(nodes);
  for (size_t k = 0; k < nodes; ++k)
    for (uint32_t r = 0; r < rails; ++r)
      out[k].push_back(enroll(lock, r, {fmt::format("node{}", k), r, rails}).member.get());
  maybe_start_round();
  cv_.notify_all();
  return out;
}

FakeMember& FakeWorld::add(uint32_t group, FakeNode node) {
  Lock lock(mu_);
  FakeMember& m = *enroll(lock, group, std::move(node)).member;
  maybe_start_round();
  cv_.notify_all();
  return m;
}

Status FakeWorld::usable(const Seat& s) const {
  if (closing_) return closed_error("the fake world ended");
  if (!broken_.is_ok()) return broken_;
  return s.failure;
}

Status FakeWorld::wait(Lock& lock, Seat& s, const char* what, const std::function<bool()>& done) {
  ++in_calls_;
  // The member's failure first: what `done` reads may be gone once it failed.
  const bool in_time = cv_.wait_for(lock, options_.wait_limit, [&] {
    return closing_ || !broken_.is_ok() || !s.failure.is_ok() || done();
  });
  --in_calls_;
  if (!in_time) {
    broken_ = internal_error(fmt::format("fake world: peer {} waited more than {} ms in {}",
                                         s.topo.peer_id, options_.wait_limit.count(), what));
    ADD_FAILURE() << broken_.to_string();
  }
  cv_.notify_all();  // the destructor waits for in_calls_
  return usable(s);
}

void FakeWorld::flush(Lock& lock) {
  Notices notices = std::move(notices_);
  notices_.clear();
  lock.unlock();
  for (auto& [member, why] : notices) member->notify_failure(why);
  lock.lock();
}

void FakeWorld::watch(const std::shared_ptr<collective::Operation>& op, PeerId id) {
  auto timer = std::make_shared<asio::steady_timer>(io_, options_.wait_limit);
  {
    Lock lock(mu_);
    if (closing_) return;
    std::erase_if(watchdogs_, [](const auto& w) { return w.expired(); });
    watchdogs_.push_back(timer);
  }
  timer->async_wait([timer, weak = std::weak_ptr(op), id,
                     ms = options_.wait_limit.count()](const asio::error_code& ec) {
    auto running = weak.lock();
    if (ec || !running || running->test()) return;
    const Status why = timeout_error(
        fmt::format("fake world: a collective of peer {} ran more than {} ms", id, ms));
    ADD_FAILURE() << why.to_string();
    running->abort(why);
  });
}

// ---- The master's membership (src/master/membership.cpp).

bool FakeWorld::admissible(const Seat& s) const {
  if (s.state != State::kPending) return false;
  if (s.node.rails <= 1) return true;
  auto it = nodes_.find(s.node.name);
  return it != nodes_.end() && it->second->registered.size() == it->second->rails;
}

bool FakeWorld::reconfiguration_needed() const {
  if (ring_broken_) return true;
  return std::any_of(seats_.begin(), seats_.end(),
                     [this](const auto& kv) { return admissible(*kv.second); });
}

bool FakeWorld::pending_flag() const {
  return ring_broken_ || (!joiners_held_ && reconfiguration_needed());
}

size_t FakeWorld::group_active(uint32_t group) const {
  return std::count_if(seats_.begin(), seats_.end(), [group](const auto& kv) {
    return kv.second->state == State::kActive && kv.second->group == group;
  });
}

size_t FakeWorld::group_waiting(uint32_t group) const {
  return std::count_if(seats_.begin(), seats_.end(), [group](const auto& kv) {
    return kv.second->state == State::kActive && kv.second->group == group && kv.second->waiting;
  });
}

void FakeWorld::maybe_start_round() {
  if (closing_) return;
  size_t active = 0, waiting = 0;
  bool admit = true;  // joiners come in only when every waiting member allows it
  for (const auto& [id, s] : seats_) {
    if (s->state != State::kActive) continue;
    ++active;
    if (s->waiting) ++waiting, admit = admit && s->admit_joiners;
  }
  if (!reconfiguration_needed()) {
    // The reason to wait went away (the joiner left before its admission).
    for (auto& [id, s] : seats_)
      if (s->waiting) s->waiting = false, ++unchanged_;
    return;
  }
  if (active == waiting) commit(admit);
}

void FakeWorld::commit(bool admit) {
  rings_.clear();
  for (auto& [id, s] : seats_)
    if (s->state == State::kActive || (admit && admissible(*s))) rings_[s->group].push_back(id);
  ring_broken_ = false;
  if (rings_.empty()) return;
  ++epoch_;
  ++epochs_formed_;
  for (auto& [group, ring] : rings_)
    for (PeerId id : ring) {
      Seat& s = seat(id);
      s.state = State::kActive;
      s.waiting = false;
      s.admit_joiners = true;
      s.attempt = 0;
    }
  joiners_held_ = !admit && reconfiguration_needed();
  link_epoch();
}

// Fresh links for the new epoch (every pair of a group: a full mesh), and every member's views.
void FakeWorld::link_epoch() {
  for (auto& [ends, link] : links_)
    link->fail(aborted_error(fmt::format("epoch {} replaced this link's", epoch_ - 1)));
  links_.clear();
  size_t world_size = 0;
  for (const auto& [group, ring] : rings_) world_size += ring.size();
  for (const auto& [group, ring] : rings_) {
    for (size_t i = 0; i < ring.size(); ++i)
      for (size_t j = i + 1; j < ring.size(); ++j) {
        auto [a, b] = transport::InProcessLink::pair(
            io_.get_executor(), fmt::format("peer {}", ring[i]), fmt::format("peer {}", ring[j]));
        links_[{ring[i], ring[j]}] = std::move(a);
        links_[{ring[j], ring[i]}] = std::move(b);
      }
    for (size_t r = 0; r < ring.size(); ++r) {
      Seat& s = seat(ring[r]);
      s.topo = {epoch_, ring[r], world_size, ring.size(), r, rings_.size(), ring};
      s.view = collective::RingView{epoch_, r, ring.size(), {}, /*full_mesh=*/true, ring};
      s.view.links.resize(ring.size());
      for (size_t o = 0; o < ring.size(); ++o)
        if (o != r) s.view.links[o] = links_.at({ring[r], ring[o]});
      arm_kill(s);
    }
  }
  if (send_delay_.count() > 0)
    for (auto& [ends, link] : links_) slow_down(link);
}

void FakeWorld::delay_sends(std::chrono::milliseconds delay) {
  Lock lock(mu_);
  send_delay_ = delay;
  for (auto& [ends, link] : links_) slow_down(link);
}

void FakeWorld::slow_down(const std::shared_ptr<transport::InProcessLink>& link) {
  if (send_delay_.count() == 0) {
    link->hold_sends({});
    link->release_held();
    return;
  }
  // Called under the link's lock at each send: it only arms a timer, which releases on a link
  // thread, outside that lock.
  std::weak_ptr<transport::InProcessLink> weak = link;
  link->hold_sends([this, weak, delay = send_delay_](transport::Tag) {
    auto timer = std::make_shared<asio::steady_timer>(io_, delay);
    timer->async_wait([timer, weak](const asio::error_code&) {
      if (auto held = weak.lock()) held->release_held();
    });
    return true;
  });
}

void FakeWorld::arm_kill(Seat& s) {
  auto left = s.sends_to_kill;
  if (!left) return;
  const PeerId id = s.topo.peer_id;
  for (auto& [ends, link] : links_) {
    if (ends.first != id) continue;
    // Runs under the link's lock: the kill runs on a link thread.
    link->hold_sends([this, left, id](transport::Tag) {
      const int64_t before = left->fetch_sub(1);
      if (before == 0) asio::post(io_, [this, id] { kill(id); });
      return before <= 0;
    });
  }
}

void FakeWorld::abort_group(uint32_t group, lh_status code, const std::string& reason) {
  ring_broken_ = true;
  for (auto& [id, s] : seats_)
    if (s->state == State::kActive && s->group == group)
      s->member->engine().abort_epoch(epoch_, Status(code, reason));
  group_epoch_failed(group);
}

void FakeWorld::group_epoch_failed(uint32_t group) {
  failed_epoch_[group] = epoch_;
  for (auto& [key, a] : attempts_)
    if (std::get<0>(key) == group && std::get<1>(key) == epoch_ && !a->decision)
      decide_attempt(*a, false);
}

void FakeWorld::decide_attempt(Attempt& a, bool ok) {
  a.decision = ok;
  ++(ok ? decided_ok_ : decided_failed_);
}

void FakeWorld::forget(Seat& s, const Status& why, bool graceful, bool notify) {
  const PeerId id = s.topo.peer_id;
  const bool was_active = s.state == State::kActive;
  s.state = State::kGone;
  s.waiting = false;
  s.failure = why;
  const Status link_down = graceful ? closed_error(fmt::format("peer {} left", id))
                                    : peer_lost(fmt::format("peer {} is gone", id));
  for (auto& [ends, link] : links_)
    if (ends.first == id) link->fail(link_down);
  s.member->engine().abort_all(why);
  if (notify) notices_.emplace_back(s.member.get(), why);
  if (was_active) {
    ring_broken_ = true;
    if (graceful)
      group_epoch_failed(s.group);  // no ABORT, but it runs no more attempts
    else
      abort_group(s.group, LH_ERR_PEER_LOST, fmt::format("peer {} left: {}", id, why.message()));
  }
  if (auto it = state_rounds_.find(s.group); it != state_rounds_.end() && !it->second->election) {
    it->second->reports.erase(id);  // no longer waited for, nor a source
    it->second->content.erase(id);
  }
  if (s.node.rails > 1) evict_node(s, why.message());
}

// The node goes as a whole (docs/protocol.md, "Eviction").
void FakeWorld::evict_node(const Seat& lost, const std::string& reason) {
  auto it = nodes_.find(lost.node.name);
  if (it == nodes_.end()) return;
  const std::unique_ptr<NodeRecord> record = std::move(it->second);
  nodes_.erase(it);
  for (const auto& [rail, id] : record->registered) {
    Seat& s = seat(id);
    if (id == lost.topo.peer_id || s.state == State::kGone) continue;
    forget(s,
           node_evicted(fmt::format("node '{}' evicted: its rail {} (peer {}) is gone: {}",
                                    lost.node.name, lost.node.rail, lost.topo.peer_id, reason)),
           false, true);
  }
}

void FakeWorld::lose(PeerId id, const Status& why, bool graceful, bool notify) {
  Lock lock(mu_);
  if (closing_) return;
  Seat& s = seat(id);
  if (s.state == State::kGone) return;
  forget(s, why, graceful, notify);
  maybe_start_round();
  for (auto& [group, round] : state_rounds_) maybe_plan(group);
  cv_.notify_all();
  flush(lock);
}

void FakeWorld::kill(PeerId id) {
  lose(id, peer_lost(fmt::format("peer {} was killed by the test", id)), false, true);
}

void FakeWorld::remove(PeerId id, Status why) {
  lose(id, why, false, true);
}

void FakeWorld::leave(PeerId id) {
  lose(id, closed_error(fmt::format("peer {} left gracefully", id)), true, false);
}

void FakeWorld::kill_after_sends(PeerId id, size_t sends) {
  Lock lock(mu_);
  Seat& s = seat(id);
  s.sends_to_kill = std::make_shared<std::atomic<int64_t>>(static_cast<int64_t>(sends));
  arm_kill(s);
}

void FakeWorld::fail_reports(PeerId id, uint32_t n) {
  Lock lock(mu_);
  seat(id).forced_failures += n;
}

void FakeWorld::on_report(ReportHook hook) {
  Lock lock(mu_);
  report_hook_ = std::move(hook);
}

// ---- The members' blocking calls.

Status FakeWorld::update_topology(Seat& s, bool admit_joiners) {
  Lock lock(mu_);
  if (Status u = usable(s); !u) return u;
  if (s.state != State::kActive) return invalid_argument("update_topology before admission");
  if (!reconfiguration_needed()) {
    ++unchanged_;
    return Status::ok();
  }
  // The first member of its group to wait ends the group's collectives (membership.cpp).
  const bool first_to_wait = group_waiting(s.group) == 0;
  const bool others_busy = group_active(s.group) - group_waiting(s.group) > 1;
  s.waiting = true;
  s.admit_joiners = admit_joiners;
  if (first_to_wait && others_busy) {
    const std::string why = fmt::format("peer {} is waiting for a reconfiguration", s.topo.peer_id);
    abort_group(s.group, LH_ERR_ABORTED, why);
    refuse_state_round(s.group, aborted_error(why));
  }
  maybe_start_round();
  cv_.notify_all();
  return wait(lock, s, "update_topology", [&] { return !s.waiting; });
}

Result<peer::Decision> FakeWorld::decide(Seat& s, peer::AttemptReport report) {
  bool ok = report.ok;
  Lock lock(mu_);
  if (Status u = usable(s); !u) return u;
  if (s.state != State::kActive) return invalid_argument("decide before admission");
  const uint64_t epoch = s.topo.epoch, n = ++s.attempt;
  if (report_hook_) {
    const ReportHook hook = report_hook_;
    lock.unlock();
    hook(s.topo.peer_id, epoch, n, ok);
    lock.lock();
    if (Status u = usable(s); !u) return u;
  }
  if (s.forced_failures > 0) --s.forced_failures, ok = false;
  auto& slot = attempts_[{s.group, epoch, n}];
  if (!slot) slot = std::make_unique<Attempt>();
  Attempt& a = *slot;
  if (!a.reported.insert(s.topo.peer_id).second)
    return internal_error(fmt::format("second report for attempt {} of epoch {}", n, epoch));
  if (!a.decision) {
    const auto failed = failed_epoch_.find(s.group);
    if (!ok || epoch < epoch_ || (failed != failed_epoch_.end() && failed->second == epoch)) {
      decide_attempt(a, false);
      if (epoch == epoch_) ring_broken_ = true;  // a FAILED attempt ends its epoch
    } else if (a.reported.size() >= group_active(s.group)) {
      decide_attempt(a, true);
    }
    if (a.decision && epoch == epoch_) joiners_held_ = false;
  }
  cv_.notify_all();
  if (Status w = wait(lock, s, "decide", [&] { return a.decision.has_value(); }); !w) return w;
  peer::Decision d;
  d.all_succeeded = *a.decision;
  if (d.all_succeeded) d.members = s.topo.ring;
  return d;
}

Result<uint32_t> FakeWorld::agree_in_node(Seat& s, uint32_t kind, uint32_t flags) {
  Lock lock(mu_);
  if (Status u = usable(s); !u) return u;
  if (s.node.rails <= 1) return flags;
  auto it = nodes_.find(s.node.name);
  if (it == nodes_.end()) return node_evicted("the node is gone");
  NodeRecord& node = *it->second;
  const uint64_t point = ++s.node_point;
  auto& p = node.open[point];
  if (!p.reached.empty() && p.kind != kind) {
    const Status why = node_evicted(
        fmt::format("node '{}' evicted: rail {} reached point {} as kind {}, a sibling as kind {}",
                    s.node.name, s.node.rail, point, kind, p.kind));
    lock.unlock();
    lose(s.topo.peer_id, why, false, true);
    return why;
  }
  p.kind = kind;
  p.flags |= flags;
  p.reached.insert(s.topo.peer_id);
  const bool complete =
      std::all_of(node.registered.begin(), node.registered.end(), [&](const auto& rail) {
        return p.reached.contains(rail.second) || seat(rail.second).state == State::kGone;
      });
  if (complete) {
    node.answers[point] = p.flags;
    node.open.erase(point);
  }
  cv_.notify_all();
  if (Status w = wait(lock, s, "agree_in_node", [&] { return node.answers.contains(point); }); !w)
    return w;
  return node.answers.at(point);
}

// ---- Observations.

uint64_t FakeWorld::epoch() const {
  Lock lock(mu_);
  return epoch_;
}

size_t FakeWorld::epochs_formed() const {
  Lock lock(mu_);
  return epochs_formed_;
}

size_t FakeWorld::unchanged_answers() const {
  Lock lock(mu_);
  return unchanged_;
}

size_t FakeWorld::decisions(bool ok) const {
  Lock lock(mu_);
  return ok ? decided_ok_ : decided_failed_;
}

std::vector<PeerId> FakeWorld::ring(uint32_t group) const {
  Lock lock(mu_);
  auto it = rings_.find(group);
  return it == rings_.end() ? std::vector<PeerId>{} : it->second;
}

bool FakeWorld::admitted(PeerId id) const {
  Lock lock(mu_);
  return seat(id).state == State::kActive;
}

size_t FakeWorld::blocked_calls() const {
  Lock lock(mu_);
  return in_calls_;
}

std::shared_ptr<transport::InProcessLink> FakeWorld::link(PeerId from, PeerId to) const {
  Lock lock(mu_);
  auto it = links_.find({from, to});
  return it == links_.end() ? nullptr : it->second;
}

}  // namespace longhaul::testing
