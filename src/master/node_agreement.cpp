#include "master/node_agreement.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace longhaul::master {

Status NodeAgreement::on_agree(PeerId id, const wire::NodeAgreeMsg& agree) {
  auto member = membership_.members().find(id);
  if (member == membership_.members().end())
    return internal_error(fmt::format("unknown peer {}", id));
  if (member->second.state != Membership::State::kActive)
    return protocol_error("NODE_AGREE before being admitted");
  const Node* node = membership_.nodes().node_of(id);
  if (!node || node->rails < 2)
    return protocol_error("NODE_AGREE from a peer that is no rail of a node of several rails");
  Point& open = open_[node->id];
  if (!open.reached.empty() && agree.point == open.point + 1 && !open.reached.contains(id)) {
    // Only after a master restart: this rail had the open point's answer from the previous
    // master, which never delivered it to the rails still there. They get the same answer. (A
    // rail that reported the open point itself cannot be past it: that breaks the protocol.)
    out_.send_all(std::vector<PeerId>(open.reached.begin(), open.reached.end()),
                  wire::NodeAgreedMsg{open.point, agree.previous});
    open = Point{};
  }
  if (!open.reached.empty() && agree.point + 1 == open.point) {
    // The same, the other way round: this rail is the one behind.
    out_.send(id, wire::NodeAgreedMsg{agree.point, open.previous});
    return Status::ok();
  }
  if (open.reached.empty() && open.departed.empty()) {
    open.point = agree.point;
    open.kind = agree.kind;
    open.previous = agree.previous;
  }
  if (open.point != agree.point || open.kind != agree.kind)
    return protocol_error(fmt::format(
        "{}: rail {} reached node agreement point {} (kind {}) while its siblings are at point "
        "{} (kind {}): the rails of a node must make the same calls",
        node->label(), node->rail_of(id), agree.point, agree.kind, open.point, open.kind));
  if (!open.reached.insert(id).second)
    return protocol_error(fmt::format("second NODE_AGREE for point {}", agree.point));
  open.flags |= agree.flags;
  answer_if_complete(*node);
  return Status::ok();
}

void NodeAgreement::on_peer_left(PeerId who, bool graceful) {
  const Node* node = membership_.nodes().node_of(who);
  if (!node) return;
  auto it = open_.find(node->id);
  if (it == open_.end()) return;
  if (!graceful) {
    open_.erase(it);  // the node is evicted whole right after this
    return;
  }
  it->second.reached.erase(who);
  it->second.departed.insert(who);
  answer_if_complete(*node);
}

void NodeAgreement::answer_if_complete(const Node& node) {
  auto it = open_.find(node.id);
  Point& open = it->second;
  // While a node is incomplete (registering, or rejoining a restarted master) its missing rails
  // will reach the point too; a rail that left gracefully will not.
  if (!node.complete() && !node.departing && open.departed.empty()) return;
  std::vector<PeerId> rails;
  for (PeerId peer : node.member_peers()) {
    if (open.departed.contains(peer)) continue;
    if (!open.reached.contains(peer)) return;
    rails.push_back(peer);
  }
  out_.send_all(rails, wire::NodeAgreedMsg{open.point, open.flags});
  open_.erase(it);
}

}  // namespace longhaul::master
