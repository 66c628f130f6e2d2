#include "master/state_ties.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include <xxhash.h>

namespace longhaul::master {
namespace {

uint64_t digest(const wire::TensorReport& t) {
  return XXH3_64bits(t.block_hashes.data(), t.block_hashes.size() * sizeof(uint64_t));
}

// Re-keys `from` by `key_of` (node handles move; no report is copied).
template <class KeyOf>
std::map<state::PeerId, state::Participant> rekey(std::map<state::PeerId, state::Participant>& from,
                                                  KeyOf key_of) {
  std::map<state::PeerId, state::Participant> to;
  while (!from.empty()) {
    auto node = from.extract(from.begin());
    node.key() = key_of(node.key());
    to.insert(std::move(node));
  }
  return to;
}

}  // namespace

size_t StateTies::agreement(uint32_t group, const wire::StateReportMsg& report) const {
  auto it = agreed_.find(group);
  if (it == agreed_.end()) return 0;
  size_t n = 0;
  for (const auto& t : report.tensors) {
    auto agreed = it->second.find(t.name);
    if (agreed != it->second.end() && agreed->second == digest(t)) ++n;
  }
  return n;
}

state::Election StateTies::elect(uint32_t group, std::map<PeerId, state::Participant>& reports,
                                 std::optional<uint64_t> last_revision, uint64_t epoch) const {
  // Tie order: most tensors holding the agreed content first, then ascending id.
  std::vector<std::pair<size_t, PeerId>> order;
  for (const auto& [id, p] : reports) order.emplace_back(agreement(group, p.report), id);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::map<PeerId, PeerId> rank_of, id_of;
  for (size_t i = 0; i < order.size(); ++i) {
    rank_of[order[i].second] = i + 1;
    id_of[i + 1] = order[i].second;
  }
  auto ranked = rekey(reports, [&](PeerId id) { return rank_of.at(id); });
  state::Election e = state::elect(ranked, last_revision, epoch);
  reports = rekey(ranked, [&](PeerId rank) { return id_of.at(rank); });
  std::map<PeerId, wire::StatePlanMsg> plans;
  for (auto& [rank, plan] : e.plans) {
    for (auto& s : plan.sources) s.peer_id = id_of.at(s.peer_id);
    for (auto& f : plan.fetches)
      for (auto& s : f.sources) s = id_of.at(s);
    plans.emplace(id_of.at(rank), std::move(plan));
  }
  e.plans = std::move(plans);
  return e;
}

StateTies::Digests StateTies::elected_content(const std::map<PeerId, state::Participant>& reports,
                                              const state::Election& e) {
  Digests content;
  for (const auto& [id, plan] : e.plans) {
    if (plan.code != LH_OK) continue;
    const auto& tensors = reports.at(id).report.tensors;
    std::set<uint32_t> fetched;
    for (const auto& f : plan.fetches) fetched.insert(f.tensor);
    // A tensor it does not fetch, it holds already in the elected form.
    for (uint32_t i = 0; i < tensors.size(); ++i)
      if (!fetched.contains(i)) content.try_emplace(tensors[i].name, digest(tensors[i]));
  }
  return content;
}

}  // namespace longhaul::master
