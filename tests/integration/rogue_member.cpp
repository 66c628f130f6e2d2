#include "rogue_member.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace longhaul::testing {

using namespace std::chrono_literals;

RogueMember::RogueMember(uint16_t master_port, Policy policy) {
  s_->policy = std::move(policy);
  s_->io = &io_;
  auto listener = net::Listener::create(io_, "127.0.0.1", 0, {});
  if (!listener) {
    ADD_FAILURE() << listener.status().to_string();
    return;
  }
  listener_ = std::move(*listener);
  listener_->start(
      [s = s_](std::shared_ptr<net::Link> link, net::Role) { s->on_data_link(std::move(link)); });
  auto control = net::connect_link(io_, "127.0.0.1", master_port, 1, {});
  if (!control) {
    ADD_FAILURE() << control.status().to_string();
    return;
  }
  s_->control = *control;
  (*control)->start([s = s_](std::vector<std::byte> bytes) { s->on_control(bytes); },
                    [s = s_](const Status&) {
                      std::lock_guard lock(s->mu);
                      s->closed = true;
                      s->cv.notify_all();
                    });
  heartbeats_ = std::thread([this] { heartbeat_loop(); });
}

RogueMember::~RogueMember() {
  close();
  if (heartbeats_.joinable()) heartbeats_.join();
}

void RogueMember::close() {
  std::vector<std::shared_ptr<net::Link>> links;
  {
    std::lock_guard lock(s_->mu);
    s_->closed = true;
    s_->cv.notify_all();
    links.swap(s_->data_links);
  }
  if (s_->control) s_->control->close();
  if (listener_) listener_->close();
  for (auto& l : links) l->close();
}

void RogueMember::register_with_master(std::optional<uint16_t> data_port) {
  send(wire::RegisterMsg{0, "127.0.0.1", data_port.value_or(this->data_port()), "", 0, 1, false});
}

void RogueMember::send(const wire::ControlMessage& message) {
  s_->send(message);
}

void RogueMember::State::send(const wire::ControlMessage& message) {
  if (control) control->send_control(wire::encode_control(message));
}

// Heartbeats start with WELCOME: a message before REGISTER is a protocol violation.
void RogueMember::heartbeat_loop() {
  std::unique_lock lock(s_->mu);
  s_->cv.wait(lock, [this] { return s_->closed || s_->id != 0; });
  while (!s_->closed) {
    lock.unlock();
    send(wire::HeartbeatMsg{});
    lock.lock();
    s_->cv.wait_for(lock, 200ms, [this] { return s_->closed; });
  }
}

void RogueMember::State::on_control(const std::vector<std::byte>& bytes) {
  auto message = wire::decode_control(bytes);
  if (!message) return;
  std::unique_lock lock(mu);
  if (auto* welcome = std::get_if<wire::WelcomeMsg>(&*message)) {
    id = welcome->peer_id;
  } else if (auto* commit = std::get_if<wire::EpochCommitMsg>(&*message)) {
    epoch = commit->epoch;
    waiting = false;
    if (commit->peers_pending) update_topology(lock);
  } else if (std::holds_alternative<wire::TopologyUnchangedMsg>(*message)) {
    waiting = false;
  } else if (auto* pending = std::get_if<wire::PendingChangedMsg>(&*message)) {
    if (pending->pending) update_topology(lock);
  } else if (std::holds_alternative<wire::AbortMsg>(*message)) {
    update_topology(lock);
  } else if (auto* gone = std::get_if<wire::RemovedMsg>(&*message)) {
    removed = gone->reason;
  } else if (auto* plan = std::get_if<wire::StatePlanMsg>(&*message)) {
    plans.push_back(std::move(*plan));
  } else if (std::holds_alternative<wire::StateCompleteMsg>(*message)) {
    ++completes;
  } else if (auto* topology = std::get_if<wire::TopologyMsg>(&*message)) {
    apply(*topology);
    link_to_neighbours(topology->epoch);
    std::vector<uint64_t> unreachable;
    if (policy.unreachable && proposal) unreachable = policy.unreachable(*proposal, id);
    const bool confirm = policy.confirm_links;
    const uint64_t proposed = topology->epoch;
    lock.unlock();
    if (confirm) send(wire::LinksReadyMsg{proposed, std::move(unreachable)});
    lock.lock();
  }
  cv.notify_all();
}

void RogueMember::State::apply(const wire::TopologyMsg& t) {
  if (t.base_epoch == 0 || !proposal) {
    proposal = t;
    return;
  }
  auto& members = proposal->members;
  auto& order = proposal->rings.at(0).order;
  for (uint64_t gone : t.removed) {
    std::erase_if(members, [gone](const wire::MemberInfo& m) { return m.peer_id == gone; });
    std::erase(order, gone);
  }
  members.insert(members.end(), t.members.begin(), t.members.end());
  for (const auto& ring : t.rings)
    if (ring.group == 0) order.insert(order.end(), ring.order.begin(), ring.order.end());
  proposal->epoch = t.epoch;
}

void RogueMember::State::link_to_neighbours(uint64_t proposed) {
  if (!policy.open_links || !proposal || proposal->rings.empty()) return;
  const auto& order = proposal->rings.at(0).order;
  const size_t n = order.size();
  const auto self = std::find(order.begin(), order.end(), id);
  if (self == order.end() || n < 2) return;
  const size_t at = static_cast<size_t>(self - order.begin());
  for (uint64_t neighbour : {order[(at + 1) % n], order[(at + n - 1) % n]}) {
    if (neighbour < id) continue;
    const auto hello = wire::encode_control(wire::PeerHelloMsg{proposed, id});
    if (auto it = outbound.find(neighbour); it != outbound.end() && it->second->failure().is_ok()) {
      it->second->send_control(hello);
      continue;
    }
    auto m =
        std::find_if(proposal->members.begin(), proposal->members.end(),
                     [neighbour](const wire::MemberInfo& i) { return i.peer_id == neighbour; });
    if (m == proposal->members.end()) continue;
    net::async_connect_link(
        *io, m->host, m->port, 1, {},
        [state = weak_from_this(), neighbour, hello](Result<std::shared_ptr<net::Link>> link) {
          auto s = state.lock();
          if (!s || !link) return;
          (*link)->start();
          (*link)->send_control(hello);
          std::lock_guard lock(s->mu);
          s->outbound[neighbour] = *link;
          s->data_links.push_back(*link);
        });
  }
}

void RogueMember::State::update_topology(std::unique_lock<std::mutex>& lock) {
  if (waiting || epoch == 0 || !policy.come_to_update) return;
  waiting = true;
  const uint64_t current = epoch;
  lock.unlock();
  send(wire::UpdateTopologyMsg{current, true});
  lock.lock();
}

// Answers each neighbour's PEER_HELLO as an honest peer would, so that its side counts the link.
void RogueMember::State::on_data_link(std::shared_ptr<net::Link> link) {
  {
    std::lock_guard lock(mu);
    if (closed) return link->close();
    data_links.push_back(link);
  }
  std::weak_ptr<net::Link> weak = link;
  link->start([state = weak_from_this(), weak](std::vector<std::byte> bytes) {
    auto message = wire::decode_control(bytes);
    auto l = weak.lock();
    auto s = state.lock();
    if (!message || !l || !s) return;
    if (auto* hello = std::get_if<wire::PeerHelloMsg>(&*message)) {
      uint64_t self = 0;
      {
        std::lock_guard lock(s->mu);
        self = s->id;
      }
      l->send_control(wire::encode_control(wire::PeerHelloAckMsg{hello->epoch, self}));
    }
  });
}

uint64_t RogueMember::wait_id(std::chrono::milliseconds timeout) {
  std::unique_lock lock(s_->mu);
  s_->cv.wait_for(lock, timeout, [this] { return s_->id != 0 || s_->removed || s_->closed; });
  return s_->id;
}

bool RogueMember::wait_admitted(std::chrono::milliseconds timeout) {
  std::unique_lock lock(s_->mu);
  s_->cv.wait_for(lock, timeout, [this] { return s_->epoch != 0 || s_->removed || s_->closed; });
  return s_->epoch != 0 && !s_->removed;
}

std::optional<std::string> RogueMember::wait_removed(std::chrono::milliseconds timeout) {
  std::unique_lock lock(s_->mu);
  s_->cv.wait_for(lock, timeout, [this] { return s_->removed.has_value(); });
  return s_->removed;
}

std::optional<wire::StatePlanMsg> RogueMember::wait_plan(std::chrono::milliseconds timeout) {
  std::unique_lock lock(s_->mu);
  s_->cv.wait_for(lock, timeout,
                  [this] { return !s_->plans.empty() || s_->removed || s_->closed; });
  if (s_->plans.empty()) return std::nullopt;
  wire::StatePlanMsg plan = std::move(s_->plans.front());
  s_->plans.erase(s_->plans.begin());
  return plan;
}

bool RogueMember::wait_complete(std::chrono::milliseconds timeout) {
  std::unique_lock lock(s_->mu);
  s_->cv.wait_for(lock, timeout, [this] { return s_->completes > 0 || s_->removed || s_->closed; });
  if (s_->completes == 0) return false;
  --s_->completes;
  return true;
}

uint64_t RogueMember::epoch() const {
  std::lock_guard lock(s_->mu);
  return s_->epoch;
}

std::optional<wire::TopologyMsg> RogueMember::last_proposal() const {
  std::lock_guard lock(s_->mu);
  return s_->proposal;
}

}  // namespace longhaul::testing
