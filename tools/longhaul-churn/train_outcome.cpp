#include "train_outcome.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace longhaul_churn {
namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.5f", x);
  return buf;
}

}  // namespace

std::optional<TrainSummary> parse_train_summary(const std::string& peer, const std::string& line) {
  if (line.empty() || line.front() != '{') return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("mode", "") != "peer" || !j.contains("steps") ||
      !j["steps"].is_number_integer() || !j.contains("state_hash"))
    return std::nullopt;
  TrainSummary s;
  s.peer = peer;
  s.steps = j["steps"].get<int64_t>();
  s.stopped = j.value("stopped", false);
  if (j.contains("final_val_loss") && j["final_val_loss"].is_number())
    s.val_loss = j["final_val_loss"].get<double>();
  s.state_hash = j["state_hash"].is_string() ? j["state_hash"].get<std::string>() : "";
  s.batch = j.value("batch", int64_t{0});
  s.context = j.value("context", int64_t{0});
  return s;
}

TrainEnd judge_survivors(const std::vector<TrainSummary>& summaries, int64_t steps) {
  TrainEnd end;
  const TrainSummary* first = nullptr;
  for (const TrainSummary& s : summaries) {
    if (s.stopped) continue;
    ++end.survivors;
    if (s.steps != steps)
      end.problems.push_back(s.peer + " ended at step " + std::to_string(s.steps) + ", not " +
                             std::to_string(steps));
    if (!s.val_loss) {
      end.problems.push_back(s.peer + " reported no final validation loss");
      continue;
    }
    if (!first) {
      first = &s;
      end.val_loss = *s.val_loss;
      end.tokens_per_batch = s.batch * s.context;
      continue;
    }
    if (s.state_hash != first->state_hash || *s.val_loss != *first->val_loss)
      end.problems.push_back("the survivors ended with different theta_g: " + first->peer +
                             " state " + first->state_hash + " val loss " +
                             number(*first->val_loss) + ", " + s.peer + " state " + s.state_hash +
                             " val loss " + number(*s.val_loss));
  }
  if (end.survivors == 0) end.problems.push_back("no peer trained to the end");
  return end;
}

LossComparison compare_losses(double val_loss, double reference_val_loss, double max_ratio) {
  LossComparison c;
  c.ratio = val_loss / reference_val_loss;
  if (!(reference_val_loss > 0) || !std::isfinite(c.ratio) || c.ratio > max_ratio)
    c.problem = "final validation loss " + number(val_loss) + " is " + number(c.ratio) +
                " times the churn-free run's " + number(reference_val_loss) +
                " (--max-loss-ratio " + number(max_ratio) + ")";
  return c;
}

int64_t equal_token_steps(const TrainRun& run, uint32_t peers) {
  const uint64_t n = peers == 0 ? 1 : peers;
  return std::max<int64_t>(1, static_cast<int64_t>((run.world_steps + n / 2) / n));
}

}  // namespace longhaul_churn
