// What the tests that run longhaul-churn share: the training text of the train workload, a guard
// that stops longhaul-churn (and so everything it started) on any early return, and its --json
// summary.
#pragma once

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process.hpp"

namespace longhaul::testing {

// The repository's documentation (about 0.3 MB of English and code): text the tiny model is still
// learning after thousands of steps, so a churn that damaged training would show in the loss (a
// small grammar's loss reaches its floor whatever happens). One --train-arg per file, in name
// order: longhaul-train holds every tenth one out for validation.
inline std::vector<std::string> docs_data_args(const std::string& docs_dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(docs_dir))
    if (e.path().extension() == ".md") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  std::vector<std::string> args;
  for (const auto& f : files) args.push_back("--train-arg=--data=" + f);
  return args;
}

// longhaul-churn must never outlive the test: on any early return it is asked to stop (SIGTERM
// makes it SIGKILL and reap every process it started) before the Child guard SIGKILLs it.
struct StopOnExit {
  Child& churn;
  ~StopOnExit() {
    if (!churn.running()) return;
    churn.kill(SIGTERM);
    (void)churn.wait_exit(std::chrono::seconds(30));
  }
};

// Everything longhaul-churn printed on stdout, one string, for failure messages.
inline std::string joined_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Its --json summary: the last stdout line (a discarded value when it is not one).
inline nlohmann::json summary_of(const std::vector<std::string>& lines) {
  if (lines.empty()) return nlohmann::json::value_t::discarded;
  return nlohmann::json::parse(lines.back(), nullptr, /*allow_exceptions=*/false);
}

}  // namespace longhaul::testing
