// Membership's node rules (membership.hpp, nodes.hpp): a node's rails are admitted together once
// all have registered, and leave together: the loss of one evicts the others.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.hpp"
#include "master/membership.hpp"

namespace longhaul::master {

namespace {

std::string shape_label(uint32_t rails, uint32_t rail) {
  return rails <= 1 ? std::string("a peer of no node")
                    : fmt::format("rail {} of a node of {} rails", rail, rails);
}

}  // namespace

Status Membership::check_node_claim(const NodeClaim& claim) const {
  LH_RETURN_IF_ERROR(nodes_.check(claim));
  const uint32_t rails = claim.name.empty() ? 1 : claim.rails;
  const uint32_t rail = rails <= 1 ? 0 : claim.rail;
  const PeerId sample = member_of_group(claim.group);
  if (sample == 0) return Status::ok();
  const Node* node = nodes_.node_of(sample);
  const uint32_t their_rails = node ? node->rails : 1;
  const uint32_t their_rail = their_rails <= 1 ? 0 : node->rail_of(sample);
  if (their_rails == rails && their_rail == rail) return Status::ok();
  return invalid_argument(fmt::format(
      "peer group {} holds {} (peer {}) and this rank is {}: a group holds the same rail of "
      "nodes of as many rails, or peers of no node (docs/protocol.md, \"Node agreement\")",
      claim.group, shape_label(their_rails, their_rail), sample, shape_label(rails, rail)));
}

// Every member of a group has the group's shape, so one member shows it: the first of its
// committed ring still a member (the ring keeps lost members until the next commit), else a
// pending one, without scanning every member. While recovering, the rings are not rebuilt yet and
// the rejoined members are not pending: any member of the group then.
PeerId Membership::member_of_group(uint32_t group) const {
  if (auto ring = rings_.find(group); ring != rings_.end())
    for (PeerId id : ring->second)
      if (members_.contains(id)) return id;
  for (PeerId id : pending_)
    if (members_.at(id).group == group) return id;
  if (recovering_)
    for (const auto& [id, member] : members_)
      if (member.group == group) return id;
  return 0;
}

void Membership::note_rail_registered(const Node& node) {
  const std::vector<uint32_t> rails = node.registered_rails();
  if (node.complete()) {
    log::info("master", "{} is complete: rails 0..{} are peers {}; admitted at the next round",
              node.label(), node.rails - 1, fmt::join(node.member_peers(), ", "));
    return;
  }
  log::info("master", "{}: rails [{}] of {} registered; admission waits for the others",
            node.label(), fmt::join(rails, " "), node.rails);
  const wire::NodeWaitingMsg waiting{node.rails, rails};
  for (const auto& [rail, peer] : node.members) out_.send(peer, waiting);
}

void Membership::follow_node(PeerId id, const std::string& reason, bool graceful) {
  const Node* node = nodes_.node_of(id);
  if (!node) return;
  const std::string label = node->label();
  const NodeId node_id = node->id;
  const uint32_t rail = node->rail_of(id);
  const std::vector<PeerId> siblings = nodes_.remove(id, graceful);
  if (graceful) {
    // The node is departing. Rails that will not leave on their own go now: those not admitted
    // yet, and those waiting in update_topology (they would take the node into a new epoch).
    const Node* departing = nodes_.find(node_id);
    if (!departing) return;
    std::vector<PeerId> stuck;
    for (const auto& [r, peer] : departing->members) {
      const Member& m = members_.at(peer);
      if (m.state == State::kPending || m.waiting) stuck.push_back(peer);
    }
    for (PeerId peer : stuck)
      remove_departing_rail(
          peer, fmt::format("{} is leaving: its rail {} (peer {}) {}", label, rail, id, reason));
    return;
  }
  if (siblings.empty()) return;
  log::warn("master", "{} evicted: its rail {} (peer {}) is gone ({}); evicting peers {}", label,
            rail, id, reason, fmt::join(siblings, ", "));
  for (PeerId sibling : siblings)
    evict(sibling, node_evicted(fmt::format("{} evicted: its rail {} (peer {}) is gone: {}", label,
                                            rail, id, reason)));
}

bool Membership::leave_departing_node(PeerId id) {
  const Node* node = nodes_.node_of(id);
  if (!node || !node->departing) return false;
  remove_departing_rail(id,
                        fmt::format("{} is leaving: {}", node->label(), node->departing_reason));
  maybe_start_round();
  sync_pending_flags();
  return true;
}

void Membership::remove_departing_rail(PeerId id, const std::string& why) {
  if (!members_.contains(id)) return;
  // Graceful: it runs no collective (not admitted, or waiting in update_topology), so its group
  // needs no ABORT; the group re-forms without it at the round it waits for.
  forget(id, fmt::format("evicted: {}", why), /*graceful=*/true);
  out_.disconnect(id, node_evicted(why));
}

}  // namespace longhaul::master
