#include "master/state_sources.hpp"

#include <algorithm>
#include <set>

#include "common/log.hpp"

namespace longhaul::master {
namespace {

// The peers that hold every tensor the plan fetches.
std::set<PeerId> common_sources(const wire::StatePlanMsg& plan) {
  std::set<PeerId> common(plan.fetches.front().sources.begin(), plan.fetches.front().sources.end());
  for (const auto& f : plan.fetches) {
    const std::set<PeerId> these(f.sources.begin(), f.sources.end());
    std::erase_if(common, [&these](PeerId p) { return !these.contains(p); });
  }
  return common;
}

}  // namespace

void StateSources::apply(uint32_t group, const NodeTable& nodes, state::Election& election) {
  std::erase_if(chosen_, [&nodes](const auto& kv) { return nodes.find(kv.first) == nullptr; });
  for (auto& [id, plan] : election.plans) {
    if (plan.code != LH_OK || plan.fetches.empty()) continue;
    const Node* node = nodes.node_of(id);
    if (!node || node->rails < 2) continue;
    const PeerId source = choose(*node, nodes, plan, election.revision);
    if (source == 0) {
      log::warn("master",
                "group {} state sync: no single node holds everything peer {} ({}) fetches; it "
                "fetches from several",
                group, id, node->label());
      continue;
    }
    narrow(plan, source);
    const Choice& choice = chosen_.at(node->id);
    log::info("master",
              "group {} state sync: {} rail {} (peer {}) takes its state from {} (peer {}) at "
              "revision {} (source chosen at revision {})",
              group, node->label(), node->rail_of(id), id, nodes.find(choice.source)->label(),
              source, election.revision, choice.revision);
  }
}

PeerId StateSources::choose(const Node& node, const NodeTable& nodes,
                            const wire::StatePlanMsg& plan, uint64_t revision) {
  const std::set<PeerId> common = common_sources(plan);
  // Per candidate node (ascending id: the oldest first), its rail that could serve.
  std::map<NodeId, PeerId> candidates;
  for (PeerId peer : common) {
    const Node* other = nodes.node_of(peer);
    if (other && other->id != node.id) candidates.emplace(other->id, peer);
  }
  if (candidates.empty()) return 0;
  auto it = chosen_.find(node.id);
  if (it != chosen_.end() && candidates.contains(it->second.source))
    return candidates.at(it->second.source);
  chosen_[node.id] = Choice{candidates.begin()->first, revision};
  return candidates.begin()->second;
}

void StateSources::narrow(wire::StatePlanMsg& plan, PeerId source) {
  for (auto& f : plan.fetches) f.sources = {source};
  std::erase_if(plan.sources, [source](const wire::StateSource& s) { return s.peer_id != source; });
}

}  // namespace longhaul::master
