#include "state/election.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "quant/dtype.hpp"
#include "state/block_hash.hpp"

namespace longhaul::state {
namespace {

uint64_t tensor_bytes(const wire::TensorReport& t) {
  return t.count * quant::element_size(static_cast<quant::DType>(t.dtype));
}

std::string describe(const wire::TensorReport& t) {
  return fmt::format("{}[{}]", quant::dtype_name(static_cast<quant::DType>(t.dtype)), t.count);
}

// The first difference between a peer's tensor list and the group's, or "" if none.
std::string schema_difference(const std::vector<wire::TensorReport>& mine,
                              const std::vector<wire::TensorReport>& group) {
  size_t i = 0, j = 0;
  while (i < mine.size() || j < group.size()) {
    if (j == group.size() || (i < mine.size() && mine[i].name < group[j].name))
      return fmt::format("tensor '{}' is not part of the group's state", mine[i].name);
    if (i == mine.size() || group[j].name < mine[i].name)
      return fmt::format("tensor '{}' of the group's state is not registered here", group[j].name);
    if (mine[i].dtype != group[j].dtype || mine[i].count != group[j].count)
      return fmt::format("tensor '{}' is {} here but {} in the group", mine[i].name,
                         describe(mine[i]), describe(group[j]));
    ++i, ++j;
  }
  return "";
}

}  // namespace

Status validate_report(const wire::StateReportMsg& report) {
  if (report.block_bytes != kBlockBytes)
    return protocol_error(
        fmt::format("state block size {} differs from this master's {} (incompatible versions)",
                    report.block_bytes, kBlockBytes));
  for (const auto& t : report.tensors) {
    const uint64_t elem = quant::element_size(static_cast<quant::DType>(t.dtype));
    if (elem == 0 || t.count > UINT64_MAX / elem / 2)
      return protocol_error(fmt::format("tensor '{}': impossible size", t.name));
    const uint64_t blocks = block_count(t.count * elem);
    if (t.block_hashes.size() != blocks || blocks > UINT32_MAX)
      return protocol_error(fmt::format("tensor '{}': {} block hashes for {} blocks", t.name,
                                        t.block_hashes.size(), blocks));
  }
  return Status::ok();
}

Election elect(const std::map<PeerId, Participant>& participants,
               std::optional<uint64_t> last_revision, uint64_t epoch) {
  Election e;
  std::map<PeerId, bool> refused;
  for (const auto& [id, p] : participants) {
    auto& plan = e.plans[id];
    plan.epoch = epoch;
    refused[id] = false;
  }
  auto refuse = [&](PeerId id, lh_status code, std::string reason) {
    auto& plan = e.plans[id];
    plan.code = code;
    plan.reason = reason.substr(0, wire::kMaxReasonBytes);
    refused[id] = true;
  };
  auto voter = [&](const Participant& p) {
    return p.report.strategy != wire::SyncStrategy::kReceiveOnly;
  };

  // 1. The group's revision.
  std::map<uint64_t, size_t> revision_votes;
  for (const auto& [id, p] : participants)
    if (voter(p)) ++revision_votes[p.report.revision];
  if (revision_votes.empty()) {
    for (const auto& [id, p] : participants)
      refuse(id, LH_ERR_STATE_MISMATCH,
             "no peer of the group provides state: every participant is receive-only");
    return e;
  }
  uint64_t g = 0;
  if (last_revision && revision_votes.contains(*last_revision)) {
    g = *last_revision;
  } else {
    size_t best = 0;
    for (const auto& [rev, votes] : revision_votes)
      if (votes >= best) best = votes, g = rev;  // ascending revisions: a tie goes to the higher
  }
  e.revision = g;
  for (const auto& [id, p] : participants) {
    if (voter(p) && p.report.revision > g)
      refuse(id, LH_ERR_STATE_MISMATCH,
             fmt::format("revision {} is ahead of the group's revision {}", p.report.revision, g));
    else if (p.report.strategy == wire::SyncStrategy::kSendOnly && p.report.revision < g)
      refuse(id, LH_ERR_STATE_MISMATCH,
             fmt::format(
                 "send-only peer at revision {} is behind the group's revision {} and must not be "
                 "overwritten",
                 p.report.revision, g));
  }
  auto counts = [&](PeerId id, const Participant& p) {
    return !refused[id] && voter(p) && p.report.revision == g;
  };

  // 2. The reference tensor list.
  std::vector<std::pair<const std::vector<wire::TensorReport>*, size_t>>
      schemas;  // first-seen order = id order
  for (const auto& [id, p] : participants) {
    if (!counts(id, p)) continue;
    bool found = false;
    for (auto& [schema, votes] : schemas)
      if (schema_difference(p.report.tensors, *schema).empty()) ++votes, found = true;
    if (!found) schemas.emplace_back(&p.report.tensors, 1);
  }
  const std::vector<wire::TensorReport>* reference = nullptr;
  size_t best_votes = 0;
  for (const auto& [schema, votes] : schemas)
    if (votes > best_votes) best_votes = votes, reference = schema;
  for (const auto& [id, p] : participants) {
    if (refused[id]) continue;
    if (std::string d = schema_difference(p.report.tensors, *reference); !d.empty())
      refuse(id, LH_ERR_STATE_MISMATCH, d);
  }

  // 3. The content of every tensor.
  const size_t n = reference->size();
  std::vector<uint64_t> winner(n);
  std::vector<const wire::TensorReport*> elected(n);
  std::map<PeerId, std::vector<uint64_t>> hashes;  // tensor hashes per peer not refused
  for (const auto& [id, p] : participants) {
    if (refused[id]) continue;
    auto& h = hashes[id];
    for (const auto& t : p.report.tensors)
      h.push_back(tensor_hash(tensor_bytes(t), t.block_hashes));
  }
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::tuple<uint64_t, size_t, PeerId>> votes;  // (hash, votes, lowest holder)
    for (const auto& [id, p] : participants) {
      if (!counts(id, p)) continue;
      const uint64_t h = hashes[id][i];
      auto it = std::find_if(votes.begin(), votes.end(),
                             [h](const auto& v) { return std::get<0>(v) == h; });
      if (it == votes.end())
        votes.emplace_back(h, 1, id);
      else
        ++std::get<1>(*it);
    }
    size_t most = 0;
    for (const auto& [h, v, holder] : votes) {
      if (v > most) {  // ascending first holders: a tie keeps the lowest peer id's content
        most = v;
        winner[i] = h;
        elected[i] = &participants.at(holder).report.tensors[i];
      }
    }
  }
  for (const auto& [id, p] : participants) {
    if (refused[id] || p.report.strategy != wire::SyncStrategy::kSendOnly) continue;
    for (size_t i = 0; i < n; ++i) {
      if (hashes[id][i] != winner[i]) {
        refuse(
            id, LH_ERR_STATE_MISMATCH,
            fmt::format(
                "tensor '{}' differs from the group's popular content and this peer is send-only",
                (*reference)[i].name));
        break;
      }
    }
  }

  // Plans: fetch the differing blocks from every holder of the elected content.
  for (const auto& [id, p] : participants) {
    if (refused[id]) continue;
    auto& plan = e.plans[id];
    plan.revision = g + 1;
    std::set<PeerId> used;
    for (size_t i = 0; i < n; ++i) {
      if (hashes[id][i] == winner[i]) continue;
      wire::TensorFetch f;
      f.tensor = static_cast<uint32_t>(i);
      for (const auto& [other, h] : hashes)
        if (other != id && !refused[other] && h[i] == winner[i]) f.sources.push_back(other);
      const auto& mine = p.report.tensors[i].block_hashes;
      const auto& want = elected[i]->block_hashes;
      for (size_t b = 0; b < want.size(); ++b)
        if (mine[b] != want[b])
          f.blocks.push_back({static_cast<uint32_t>(b), want[b], bit(elected[i]->compressible, b)});
      if (f.blocks.empty()) continue;  // equal blocks under different tensor hashes cannot happen
      used.insert(f.sources.begin(), f.sources.end());
      plan.fetches.push_back(std::move(f));
    }
    for (PeerId s : used)
      plan.sources.push_back({s, participants.at(s).host, participants.at(s).port});
  }
  return e;
}

}  // namespace longhaul::state
