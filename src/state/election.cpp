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

// One election, step by step. Each step refuses the participants it rules out (their plan
// carries the code and reason) and the later steps count only the participants still in.
class Ballot {
 public:
  Ballot(const std::map<PeerId, Participant>& participants, uint64_t epoch)
      : participants_(participants) {
    for (const auto& [id, p] : participants) {
      e_.plans[id].epoch = epoch;
      refused_[id] = false;
    }
  }

  // 1. The group's revision G: the one recorded at the last sync if a voter holds it, else the
  // one most voters hold (a tie goes to the higher). Refuses a voter ahead of G and a send-only
  // peer behind it. False (everyone refused) when no participant votes.
  bool elect_revision(std::optional<uint64_t> last_revision) {
    std::map<uint64_t, size_t> revision_votes;
    for (const auto& [id, p] : participants_)
      if (voter(p)) ++revision_votes[p.report.revision];
    if (revision_votes.empty()) {
      for (const auto& [id, p] : participants_)
        refuse(id, LH_ERR_STATE_MISMATCH,
               "no peer of the group provides state: every participant is receive-only");
      return false;
    }
    if (last_revision && revision_votes.contains(*last_revision)) {
      g_ = *last_revision;
    } else {
      size_t best = 0;
      for (const auto& [rev, votes] : revision_votes)
        if (votes >= best) best = votes, g_ = rev;  // ascending revisions: a tie goes to the higher
    }
    e_.revision = g_;
    for (const auto& [id, p] : participants_) {
      if (voter(p) && p.report.revision > g_)
        refuse(
            id, LH_ERR_STATE_MISMATCH,
            fmt::format("revision {} is ahead of the group's revision {}", p.report.revision, g_));
      else if (p.report.strategy == wire::SyncStrategy::kSendOnly && p.report.revision < g_)
        refuse(id, LH_ERR_STATE_MISMATCH,
               fmt::format("send-only peer at revision {} is behind the group's revision {} and "
                           "must not be overwritten",
                           p.report.revision, g_));
    }
    return true;
  }

  // 2. The reference tensor list: the one most counting voters hold (a tie goes to the one seen
  // first, in peer id order). Refuses every participant whose list differs from it.
  void elect_tensor_list() {
    std::vector<std::pair<const std::vector<wire::TensorReport>*, size_t>>
        schemas;  // first-seen order = id order
    for (const auto& [id, p] : participants_) {
      if (!counts(id, p)) continue;
      bool found = false;
      for (auto& [schema, votes] : schemas)
        if (schema_difference(p.report.tensors, *schema).empty()) ++votes, found = true;
      if (!found) schemas.emplace_back(&p.report.tensors, 1);
    }
    size_t best_votes = 0;
    for (const auto& [schema, votes] : schemas)
      if (votes > best_votes) best_votes = votes, reference_ = schema;
    for (const auto& [id, p] : participants_) {
      if (refused_.at(id) || &p.report.tensors == reference_) continue;
      if (std::string d = schema_difference(p.report.tensors, *reference_); !d.empty())
        refuse(id, LH_ERR_STATE_MISMATCH, d);
    }
  }

  // 3. The content of every tensor: the tensor hash most counting voters hold (a tie keeps the
  // lowest peer id's content).
  void elect_contents() {
    const size_t n = reference_->size();
    winner_.assign(n, 0);
    elected_.assign(n, nullptr);
    for (const auto& [id, p] : participants_) {
      if (refused_.at(id)) continue;
      auto& h = hashes_[id];
      h.reserve(p.report.tensors.size());
      for (const auto& t : p.report.tensors)
        h.push_back(tensor_hash(tensor_bytes(t), t.block_hashes));
      if (counts(id, p)) voters_.push_back({&p, &h});
    }
    for (size_t i = 0; i < n; ++i) elect_content(i);
  }

  // A send-only peer must not be overwritten: refused where its content lost the vote.
  void refuse_outvoted_send_only() {
    for (const auto& [id, p] : participants_) {
      if (refused_.at(id) || p.report.strategy != wire::SyncStrategy::kSendOnly) continue;
      for (size_t i = 0; i < reference_->size(); ++i) {
        if (hashes_.at(id)[i] != winner_[i]) {
          refuse(id, LH_ERR_STATE_MISMATCH,
                 fmt::format("tensor '{}' differs from the group's popular content and this peer "
                             "is send-only",
                             (*reference_)[i].name));
          break;
        }
      }
    }
  }

  // Plans: every participant still in fetches its differing blocks from every holder of the
  // elected content.
  void write_plans() {
    for (const auto& [id, p] : participants_) {
      if (refused_.at(id)) continue;
      auto& plan = e_.plans[id];
      plan.revision = g_ + 1;
      std::set<PeerId> used;
      for (size_t i = 0; i < reference_->size(); ++i) {
        if (hashes_.at(id)[i] == winner_[i]) continue;
        wire::TensorFetch f = fetch(id, p, i);
        if (f.blocks.empty()) continue;  // equal blocks under different tensor hashes cannot happen
        used.insert(f.sources.begin(), f.sources.end());
        plan.fetches.push_back(std::move(f));
      }
      for (PeerId s : used)
        plan.sources.push_back({s, participants_.at(s).host, participants_.at(s).port});
    }
  }

  Election take() { return std::move(e_); }

 private:
  static bool voter(const Participant& p) {
    return p.report.strategy != wire::SyncStrategy::kReceiveOnly;
  }
  // Whether the participant's content counts in the votes of steps 2 and 3.
  bool counts(PeerId id, const Participant& p) const {
    return !refused_.at(id) && voter(p) && p.report.revision == g_;
  }
  void refuse(PeerId id, lh_status code, const std::string& reason) {
    auto& plan = e_.plans[id];
    plan.code = code;
    plan.reason = reason.substr(0, wire::kMaxReasonBytes);
    refused_[id] = true;
  }

  void elect_content(size_t i) {
    auto& votes = votes_;  // (hash, votes, lowest holder); reused: one allocation per election
    votes.clear();
    for (const Voter& voter : voters_) {
      const uint64_t h = (*voter.hashes)[i];
      auto it = std::find_if(votes.begin(), votes.end(),
                             [h](const auto& v) { return std::get<0>(v) == h; });
      if (it == votes.end())
        votes.emplace_back(h, 1, &voter);
      else
        ++std::get<1>(*it);
    }
    size_t most = 0;
    for (const auto& [h, v, holder] : votes) {
      if (v > most) {  // ascending first holders: a tie keeps the lowest peer id's content
        most = v;
        winner_[i] = h;
        elected_[i] = &holder->participant->report.tensors[i];
      }
    }
  }

  // Tensor i's blocks where `id`'s content differs from the elected one, and its sources.
  wire::TensorFetch fetch(PeerId id, const Participant& p, size_t i) const {
    wire::TensorFetch f;
    f.tensor = static_cast<uint32_t>(i);
    for (const auto& [other, h] : hashes_)
      if (other != id && !refused_.at(other) && h[i] == winner_[i]) f.sources.push_back(other);
    const auto& mine = p.report.tensors[i].block_hashes;
    const auto& want = elected_[i]->block_hashes;
    for (size_t b = 0; b < want.size(); ++b)
      if (mine[b] != want[b])
        f.blocks.push_back({static_cast<uint32_t>(b), want[b], bit(elected_[i]->compressible, b)});
    return f;
  }

  const std::map<PeerId, Participant>& participants_;
  Election e_;
  std::map<PeerId, bool> refused_;
  uint64_t g_ = 0;                                              // the group's revision
  const std::vector<wire::TensorReport>* reference_ = nullptr;  // the elected tensor list
  std::map<PeerId, std::vector<uint64_t>> hashes_;  // tensor hashes of every peer still in
  std::vector<uint64_t> winner_;                    // the elected hash of each tensor
  std::vector<const wire::TensorReport*> elected_;  // a holder's report of each elected tensor
  // The participants whose content counts (step 3), in id order, with their tensor hashes.
  struct Voter {
    const Participant* participant;
    const std::vector<uint64_t>* hashes;
  };
  std::vector<Voter> voters_;
  std::vector<std::tuple<uint64_t, size_t, const Voter*>> votes_;  // elect_content's scratch
};

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
  Ballot ballot(participants, epoch);
  if (!ballot.elect_revision(last_revision)) return ballot.take();
  ballot.elect_tensor_list();
  ballot.elect_contents();
  ballot.refuse_outvoted_send_only();
  ballot.write_plans();
  return ballot.take();
}

}  // namespace longhaul::state
