// The fake world's shared-state syncs (src/master/state_arbiter.cpp in memory): every active member
// of the group reports its registry, state::elect plans, and each member copies the elected blocks
// from the holders' reported bytes.
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "fake_group.hpp"
#include "state/block_hash.hpp"

namespace longhaul::testing {
namespace {

// The registry's bytes as reported: what a fetcher of this member's blocks gets.
std::shared_ptr<const std::vector<std::vector<std::byte>>> snapshot(const state::Registry& r) {
  auto bytes = std::make_shared<std::vector<std::vector<std::byte>>>();
  for (const auto& t : r.tensors()) bytes->emplace_back(t.data, t.data + t.bytes);
  return bytes;
}

}  // namespace

Status FakeWorld::sync_state(Seat& s, state::Registry& registry, wire::SyncStrategy strategy,
                             state::SyncResult* result) {
  *result = {};
  const PeerId id = s.topo.peer_id;
  uint64_t epoch = 0;
  {
    Lock lock(mu_);
    if (Status u = usable(s); !u) return u;
    if (s.state != State::kActive) return invalid_argument("a state sync before admission");
    epoch = s.topo.epoch;
  }
  state::Participant p;
  p.report = state::make_report(registry, s.member->workers(), epoch, strategy);
  p.host = fmt::format("peer {}", id);
  auto content = snapshot(registry);
  Lock lock(mu_);
  if (Status u = usable(s); !u) return u;
  if (epoch != epoch_ || group_waiting(s.group) > 0)
    return aborted_error("the group is reconfiguring: no state sync until its next epoch");
  auto& slot = state_rounds_[s.group];
  if (!slot || slot->election || !slot->refused.is_ok() || slot->epoch != epoch) {
    slot = std::make_shared<StateRound>();
    slot->epoch = epoch;
  }
  const std::shared_ptr<StateRound> round = slot;
  if (!round->reports.emplace(id, std::move(p)).second)
    return internal_error(fmt::format("peer {} reported twice to one state sync", id));
  round->content[id] = std::move(content);
  maybe_plan(s.group);
  cv_.notify_all();
  LH_RETURN_IF_ERROR(wait(lock, s, "a state sync",
                          [&] { return round->election.has_value() || !round->refused.is_ok(); }));
  if (!round->refused.is_ok()) return round->refused;
  const wire::StatePlanMsg plan = round->election->plans.at(id);
  lock.unlock();
  if (plan.code != LH_OK) return Status(plan.code, plan.reason);
  std::set<PeerId> sources;
  for (const auto& f : plan.fetches) {
    const state::Tensor& t = registry.tensors()[f.tensor];
    const auto& from = (*round->content.at(f.sources.front()))[f.tensor];
    sources.insert(f.sources.front());
    for (const auto& b : f.blocks) {
      const uint64_t at = state::block_offset(b.index), n = state::block_length(t.bytes, b.index);
      std::memcpy(t.data + at, from.data() + at, n);
      result->rx_bytes += n;
      ++result->blocks_fetched;
    }
  }
  result->sources = sources.size();
  registry.set_revision(plan.revision);
  return Status::ok();
}

// Plans the group's sync once every active member of the group has reported.
void FakeWorld::maybe_plan(uint32_t group) {
  auto it = state_rounds_.find(group);
  if (it == state_rounds_.end()) return;
  StateRound& round = *it->second;
  if (round.election || !round.refused.is_ok() || round.reports.empty()) return;
  for (const auto& [id, s] : seats_)
    if (s->state == State::kActive && s->group == group && !round.reports.contains(id)) return;
  auto last = last_revision_.find(group);
  round.election = state::elect(
      round.reports, last == last_revision_.end() ? std::nullopt : std::optional(last->second),
      round.epoch);
  for (const auto& [id, plan] : round.election->plans)
    if (plan.code == LH_OK) last_revision_[group] = round.election->revision + 1;
}

void FakeWorld::refuse_state_round(uint32_t group, const Status& why) {
  auto it = state_rounds_.find(group);
  if (it == state_rounds_.end() || it->second->election) return;
  it->second->refused = why;
  state_rounds_.erase(it);
}

}  // namespace longhaul::testing
