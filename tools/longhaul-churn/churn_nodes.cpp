// longhaul-churn's nodes (--nodes M --rails L): M machines of L longhaul-peer ranks each, one per
// rail. A disruption picks a whole healthy node and hits one of its ranks (SIGKILL or SIGSTOP) or
// all of them (SIGKILL or SIGTERM); the master must then evict the node, so its other ranks end
// with exit status 4 (LH_ERR_NODE_EVICTED), which the monitor expects. A node whose ranks have all
// gone is replaced by a new node (a fresh name) after --rejoin-delay-ms.
#include <algorithm>
#include <set>

#include "churn_run.hpp"

namespace longhaul_churn {

std::vector<ChurnRun::PeerProc*> ChurnRun::ranks_of(const std::string& node) {
  std::vector<PeerProc*> out;
  for (auto& p : peers_)
    if (p->node == node) out.push_back(p.get());
  return out;
}

void ChurnRun::start_node() {
  const std::string name = "n" + std::to_string(next_node_++);
  live_nodes_.push_back(name);
  for (uint32_t rail = 0; rail < flags_.rails; ++rail) start_peer(0, false, name, rail);
}

void ChurnRun::disrupt_node() {
  // Healthy nodes: every rank running, joined, stepping and undisturbed.
  const std::vector<std::string> ok = monitor_.disruptable();
  std::vector<std::string> healthy;
  for (const auto& node : live_nodes_) {
    const auto ranks = ranks_of(node);
    const bool all_ok = std::all_of(ranks.begin(), ranks.end(), [&](const PeerProc* p) {
      return !p->child->running() ? false : std::find(ok.begin(), ok.end(), p->name) != ok.end();
    });
    if (all_ok && ranks.size() == flags_.rails) healthy.push_back(node);
  }
  if (healthy.size() < flags_.min_alive + 1) return;
  const std::string node =
      healthy[std::uniform_int_distribution<size_t>(0, healthy.size() - 1)(rng_)];
  const Action action = pick_action();
  std::vector<PeerProc*> ranks = ranks_of(node);
  // A SIGSTOP stalls one rank; a SIGKILL hits one rank or the whole node (even odds); a SIGTERM
  // ends the whole node (one rank leaving alone is the node leaving too, just slower).
  const bool whole =
      action == Action::kTerm ||
      (action == Action::kKill && std::uniform_int_distribution<int>(0, 1)(rng_) == 1);
  if (!whole) {
    PeerProc* one = ranks[std::uniform_int_distribution<size_t>(0, ranks.size() - 1)(rng_)];
    ranks = {one};
  }
  append_log(node, std::string("churn: ") + (whole ? "the whole node" : "one rank"));
  for (PeerProc* p : ranks_of(node)) monitor_.on_node_disrupted(p->name);
  for (PeerProc* p : ranks) act(*p, action);
}

void ChurnRun::on_rank_exit(const PeerProc& p) {
  const auto ranks = ranks_of(p.node);
  if (std::any_of(ranks.begin(), ranks.end(),
                  [](const PeerProc* r) { return r->child->running(); }))
    return;
  std::erase(live_nodes_, p.node);
  if (phase_ == Phase::kChurn) respawns_.push_back({now_ms() + flags_.rejoin_delay_ms, 0, true});
}

}  // namespace longhaul_churn
