#include "master/node_agreement.hpp"

#include <fmt/format.h>

namespace longhaul::master {

namespace {

// The node of `id`, an admitted rail of a node of several rails; else why it may not agree.
Result<const Node*> rail_node(const Membership& membership, PeerId id, const char* what) {
  auto member = membership.members().find(id);
  if (member == membership.members().end())
    return internal_error(fmt::format("unknown peer {}", id));
  if (member->second.state != Membership::State::kActive)
    return protocol_error(fmt::format("{} before being admitted", what));
  const Node* node = membership.nodes().node_of(id);
  if (!node || node->rails < 2)
    return protocol_error(
        fmt::format("{} from a peer that is no rail of a node of several rails", what));
  return node;
}

}  // namespace

Status NodeAgreement::on_agree(PeerId id, const wire::NodeAgreeMsg& agree) {
  auto found = rail_node(membership_, id, "NODE_AGREE");
  if (!found) return found.status();
  const Node& node = **found;
  if (auto last = answered_.find(node.id);
      last != answered_.end() && agree.point <= last->second.point) {
    Answer& known = last->second;
    if (agree.point < known.point || known.told.contains(id))
      return protocol_error(
          fmt::format("{}: rail {} reported node agreement point {}, which has "
                      "its answer already (the node is at point {})",
                      node.label(), node.rail_of(id), agree.point, known.point));
    // Only after a master restart: a sibling had this point's answer from the previous master,
    // which never delivered it to this rail. It gets the same answer.
    give_answer(node.id, agree.point, known.flags, {id});
    return Status::ok();
  }
  Point& open = open_[node.id];
  if (open.reached.empty() && open.departed.empty()) {
    open.point = agree.point;
    open.kind = agree.kind;
  }
  if (open.point != agree.point || open.kind != agree.kind)
    return protocol_error(fmt::format(
        "{}: rail {} reached node agreement point {} (kind {}) while its siblings are at point "
        "{} (kind {}): the rails of a node must make the same calls",
        node.label(), node.rail_of(id), agree.point, agree.kind, open.point, open.kind));
  if (!open.reached.insert(id).second)
    return protocol_error(fmt::format("second NODE_AGREE for point {}", agree.point));
  open.flags |= agree.flags;
  answer_if_complete(node);
  return Status::ok();
}

Status NodeAgreement::on_rejoin(PeerId id, uint64_t answered, uint32_t answer) {
  if (answered == 0) return Status::ok();
  auto found = rail_node(membership_, id, "a node agreement answer in REJOIN");
  if (!found) return found.status();
  const Node& node = **found;
  Answer& last = answered_[node.id];
  if (answered < last.point) return Status::ok();  // a sibling is further on
  if (answered == last.point && answer != last.flags)
    return protocol_error(
        fmt::format("{}: rail {} had answer {} to node agreement point {}, a sibling had answer {}",
                    node.label(), node.rail_of(id), answer, answered, last.flags));
  if (answered > last.point) last = Answer{answered, answer, {}};
  last.told.insert(id);
  // The siblings that reported this point again to this master and wait for its answer.
  auto open = open_.find(node.id);
  if (open != open_.end() && open->second.point == answered) {
    const std::set<PeerId> waiting = open->second.reached;
    open_.erase(open);
    give_answer(node.id, answered, answer, std::vector<PeerId>(waiting.begin(), waiting.end()));
  }
  return Status::ok();
}

void NodeAgreement::on_peer_left(PeerId who, bool graceful) {
  const Node* node = membership_.nodes().node_of(who);
  if (!node) return;
  // Its last rail, or a rail lost abruptly (the node is evicted whole right after this).
  if (!graceful || node->member_peers().size() <= 1) return forget(node->id);
  auto it = open_.find(node->id);
  if (it == open_.end()) return;
  it->second.reached.erase(who);
  it->second.departed.insert(who);
  answer_if_complete(*node);
}

void NodeAgreement::answer_if_complete(const Node& node) {
  auto it = open_.find(node.id);
  const Point& open = it->second;
  // While a node is incomplete (registering, or rejoining a restarted master) its missing rails
  // will reach the point too; a rail that left gracefully will not.
  if (!node.complete() && !node.departing && open.departed.empty()) return;
  std::vector<PeerId> rails;
  for (PeerId peer : node.member_peers()) {
    if (open.departed.contains(peer)) continue;
    if (!open.reached.contains(peer)) return;
    rails.push_back(peer);
  }
  const uint64_t point = open.point;
  const uint32_t flags = open.flags;
  open_.erase(it);
  give_answer(node.id, point, flags, rails);
}

void NodeAgreement::give_answer(NodeId node, uint64_t point, uint32_t flags,
                                const std::vector<PeerId>& rails) {
  Answer& last = answered_[node];
  if (point > last.point) last = Answer{point, flags, {}};
  last.told.insert(rails.begin(), rails.end());
  out_.send_all(rails, wire::NodeAgreedMsg{point, flags});
}

void NodeAgreement::forget(NodeId node) {
  open_.erase(node);
  answered_.erase(node);
}

}  // namespace longhaul::master
