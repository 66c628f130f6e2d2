// The master's state machines driven directly, without sockets: a recording outbox (wired as the
// server wires it) and helpers that admit peers round by round.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "master/membership.hpp"

namespace longhaul::master {

struct RecordingOutbox : Outbox {
  std::vector<std::pair<PeerId, wire::ControlMessage>> sent;
  std::vector<std::pair<PeerId, Status>> disconnected;
  std::vector<uint64_t> rounds;
  std::vector<uint32_t> reconfiguring;
  // Where the server forwards these events (the arbiters); empty: dropped.
  std::function<void(uint32_t group)> on_group_epoch_failed;
  std::function<void(PeerId who)> on_peer_forgotten;
  std::function<void(PeerId who, bool graceful)> on_peer_left;

  void send(PeerId to, const wire::ControlMessage& m) override { sent.emplace_back(to, m); }
  void disconnect(PeerId who, const Status& why) override { disconnected.emplace_back(who, why); }
  void round_started(uint64_t epoch) override { rounds.push_back(epoch); }
  void group_reconfiguring(uint32_t group) override { reconfiguring.push_back(group); }
  void group_epoch_failed(uint32_t group) override {
    if (on_group_epoch_failed) on_group_epoch_failed(group);
  }
  void peer_forgotten(PeerId who) override {
    if (on_peer_forgotten) on_peer_forgotten(who);
  }
  void peer_left(PeerId who, uint32_t /*group*/, const std::string& /*reason*/,
                 bool graceful) override {
    if (on_peer_left) on_peer_left(who, graceful);
  }

  // Removes and returns the messages of type T sent so far, in order.
  template <class T>
  std::vector<std::pair<PeerId, T>> take() {
    std::vector<std::pair<PeerId, T>> out;
    for (auto it = sent.begin(); it != sent.end();) {
      if (auto* m = std::get_if<T>(&it->second)) {
        out.emplace_back(it->first, *m);
        it = sent.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
};

class MasterFixture : public ::testing::Test {
 protected:
  RecordingOutbox out;
  Membership m{out};

  PeerId join(uint32_t group = 0, bool full_mesh = false) {
    const PeerId id = m.allocate_id();
    m.add_pending(id, group, "127.0.0.1", static_cast<uint16_t>(1000 + id), {}, full_mesh);
    return id;
  }
  // Answers the current proposal for everyone in it; returns the proposal's epoch.
  uint64_t all_ready() {
    auto proposals = out.take<wire::TopologyMsg>();
    EXPECT_FALSE(proposals.empty());
    if (proposals.empty()) return 0;
    const uint64_t epoch = proposals.back().second.epoch;
    for (auto& [id, p] : proposals)
      if (p.epoch == epoch) {
        EXPECT_TRUE(m.on_links_ready(id, epoch, {}).is_ok());
      }
    return epoch;
  }
  void all_update(const std::vector<PeerId>& ids) {
    for (PeerId id : ids) ASSERT_TRUE(m.on_update_topology(id, m.epoch()).is_ok());
  }
  // Admits `n` peers of `group` (after those already active) one round at a time; clears `out`.
  std::vector<PeerId> form(size_t n, uint32_t group = 0, bool full_mesh = false) {
    std::vector<PeerId> ids;
    for (size_t i = 0; i < n; ++i) {
      std::vector<PeerId> active;
      for (const auto& [id, member] : m.members())
        if (member.state == Membership::State::kActive) active.push_back(id);
      ids.push_back(join(group, full_mesh));
      for (PeerId a : active) EXPECT_TRUE(m.on_update_topology(a, m.epoch()).is_ok());
      all_ready();
    }
    out.sent.clear();
    return ids;
  }
  // What peer `id` of `group` reports in its REJOIN to a restarted master (m.begin_recovery()):
  // `epoch` and its group's `ring` in it, as the server hands it to Membership.
  static Membership::RejoinReport rejoin_report(PeerId id, uint64_t epoch, std::vector<PeerId> ring,
                                                uint32_t group = 0) {
    Membership::RejoinReport r;
    r.id = id;
    r.group = group;
    r.host = "127.0.0.1";
    r.port = static_cast<uint16_t>(2000 + id);
    r.epoch = epoch;
    r.world = static_cast<uint32_t>(ring.size());
    r.ring = std::move(ring);
    return r;
  }
};

}  // namespace longhaul::master
