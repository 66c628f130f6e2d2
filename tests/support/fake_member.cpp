// The fake world's members: each port's call is its world's (fake_group.cpp), under its lock.
#include <fmt/format.h>

#include "fake_group.hpp"

namespace longhaul::testing {

FakeMember::FakeMember(FakeWorld& world, PeerId id) : world_(world), id_(id) {}

FakeMember::~FakeMember() = default;

Status FakeMember::connect() {
  FakeWorld::Lock lock(world_.mu_);
  auto& s = world_.seat(id_);
  return world_.wait(lock, s, "connect", [&] { return s.state == FakeWorld::State::kActive; });
}

peer::TopologyView FakeMember::view() const {
  FakeWorld::Lock lock(world_.mu_);
  return world_.seat(id_).topo;
}

bool FakeMember::peers_pending() const {
  FakeWorld::Lock lock(world_.mu_);
  return !world_.seat(id_).failure.is_ok() || world_.pending_flag();
}

Status FakeMember::failure() const {
  FakeWorld::Lock lock(world_.mu_);
  return world_.seat(id_).failure;
}

Status FakeMember::update_topology(bool admit_joiners) {
  return world_.update_topology(world_.seat(id_), admit_joiners);
}

Result<peer::Decision> FakeMember::decide(peer::AttemptReport report) {
  return world_.decide(world_.seat(id_), report);
}

Result<uint32_t> FakeMember::agree_in_node(uint32_t kind, uint32_t flags) {
  return world_.agree_in_node(world_.seat(id_), kind, flags);
}

void FakeMember::close() {
  world_.lose(id_, closed_error(fmt::format("peer {} closed its session", id_)), false, false);
}

Status FakeMember::send_state_message(wire::ControlMessage) {
  return Status(LH_ERR_UNSUPPORTED, "the fake world has no state channel: use its StateSync");
}

uint64_t FakeMember::add_failure_listener(FailureListener listener) {
  std::lock_guard lock(listeners_mu_);
  listeners_.emplace_back(next_listener_, std::move(listener));
  return next_listener_++;
}

void FakeMember::remove_failure_listener(uint64_t id) {
  std::lock_guard lock(listeners_mu_);
  std::erase_if(listeners_, [id](const auto& l) { return l.first == id; });
}

void FakeMember::notify_failure(const Status& why) {
  std::lock_guard lock(listeners_mu_);
  for (auto& [id, listener] : listeners_) listener(why);
}

collective::RingView FakeMember::ring_view() const {
  FakeWorld::Lock lock(world_.mu_);
  return world_.seat(id_).view;
}

Result<std::shared_ptr<collective::AllReduceOp>> FakeMember::allreduce(
    const collective::AllReduceSpec& spec) {
  if (Status f = failure(); !f) return f;
  auto op = engine_.allreduce(ring_view(), spec);
  if (!op) {
    if (Status f = failure(); !f) return f;
    return op;
  }
  world_.watch(*op, id_);
  return op;
}

Result<std::shared_ptr<collective::GatherOp>> FakeMember::gather(
    const collective::GatherSpec& spec) {
  if (Status f = failure(); !f) return f;
  auto op = engine_.gather(ring_view(), spec);
  if (op) world_.watch(*op, id_);
  return op;
}

Status FakeMember::sync(state::Registry& registry, wire::SyncStrategy strategy,
                        state::SyncResult* result) {
  return world_.sync_state(world_.seat(id_), registry, strategy, result);
}

void in_parallel(size_t n, const std::function<void(size_t)>& body) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

}  // namespace longhaul::testing
