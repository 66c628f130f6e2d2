#include "master/nodes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace longhaul::master {

std::string Node::label() const {
  return fmt::format("node '{}'", name);
}

uint32_t Node::rail_of(PeerId peer) const {
  for (const auto& [rail, member] : members)
    if (member == peer) return rail;
  return 0;
}

std::vector<uint32_t> Node::registered_rails() const {
  std::vector<uint32_t> out;
  for (const auto& [rail, peer] : members) out.push_back(rail);
  return out;
}

std::vector<PeerId> Node::member_peers() const {
  std::vector<PeerId> out;
  for (const auto& [rail, peer] : members) out.push_back(peer);
  return out;
}

Node* NodeTable::by_name(const std::string& name) {
  for (auto& [id, node] : nodes_)
    if (node.name == name) return &node;
  return nullptr;
}

const Node* NodeTable::by_name(const std::string& name) const {
  for (const auto& [id, node] : nodes_)
    if (node.name == name) return &node;
  return nullptr;
}

Status NodeTable::check(const NodeClaim& claim) const {
  if (claim.name.empty()) return Status::ok();
  if (claim.rails == 0 || claim.rail >= claim.rails)
    return invalid_argument(fmt::format("rail {} out of range: node '{}' has {} rails", claim.rail,
                                        claim.name, claim.rails));
  const Node* node = by_name(claim.name);
  if (!node) return Status::ok();
  if (node->host != claim.host)
    return invalid_argument(fmt::format(
        "two nodes claim the identity '{}': its rails registered from {}, this rank from {} "
        "(give every machine its own node id)",
        claim.name, node->host, claim.host));
  if (node->departing)
    return invalid_argument(
        fmt::format("{} is leaving ({}); start the node again once all its ranks have gone",
                    node->label(), node->departing_reason));
  if (claim.rails != node->rails)
    return invalid_argument(fmt::format(
        "rail counts disagree: this rank of {} declares {} rails, its rail {} declared {}",
        node->label(), claim.rails, node->members.begin()->first, node->rails));
  if (auto it = node->members.find(claim.rail); it != node->members.end())
    return invalid_argument(
        node->complete()
            ? fmt::format("{} already has all its {} rails (peers {}): two nodes claim the same "
                          "identity, or a rank restarted before its node was evicted",
                          node->label(), node->rails, fmt::join(node->member_peers(), ", "))
            : fmt::format("rail {} of {} registered twice (peer {} holds it)", claim.rail,
                          node->label(), it->second));
  for (const auto& [rail, group] : node->groups)
    if (group == claim.group)
      return invalid_argument(
          fmt::format("rails {} and {} of {} both in peer group {}: each rail needs its own group",
                      rail, claim.rail, node->label(), group));
  return Status::ok();
}

const Node* NodeTable::add(PeerId id, const NodeClaim& claim) {
  if (claim.name.empty()) return nullptr;
  Node* node = by_name(claim.name);
  if (!node) {
    const NodeId nid = ++last_id_;
    node = &nodes_[nid];
    node->id = nid;
    node->name = claim.name;
    node->rails = claim.rails;
    node->host = claim.host;
  }
  node->members[claim.rail] = id;
  node->groups[claim.rail] = claim.group;
  peers_[id] = node->id;
  return node;
}

const Node* NodeTable::node_of(PeerId id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : find(it->second);
}

const Node* NodeTable::find(NodeId id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::vector<PeerId> NodeTable::remove(PeerId id, bool graceful) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return {};
  Node& node = nodes_.at(it->second);
  peers_.erase(it);
  for (auto m = node.members.begin(); m != node.members.end(); ++m) {
    if (m->second != id) continue;
    node.groups.erase(m->first);
    if (graceful && !node.departing) {
      node.departing = true;
      node.departing_reason = fmt::format("its rail {} left gracefully", m->first);
    }
    node.members.erase(m);
    break;
  }
  std::vector<PeerId> siblings;
  if (graceful && !node.members.empty()) return siblings;
  for (const auto& [rail, peer] : node.members) {
    siblings.push_back(peer);
    peers_.erase(peer);
  }
  nodes_.erase(node.id);
  return siblings;
}

bool NodeTable::admissible(PeerId id) const {
  const Node* node = node_of(id);
  return !node || (node->complete() && !node->departing);
}

}  // namespace longhaul::master
