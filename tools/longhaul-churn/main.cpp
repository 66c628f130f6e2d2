// longhaul-churn: spawns a longhaul-master and N longhaul-peer daemons, inflicts churn on them
// (SIGKILL, SIGTERM, SIGSTOP/SIGCONT, new peers, optionally an emulated WAN) and reports
// violations of longhaul's guarantees. See --help and docs/churn.md.
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "churn_flags.hpp"
#include "churn_run.hpp"

namespace {

namespace fs = std::filesystem;

// The directory of this executable.
fs::path self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return fs::current_path();
  buf[n] = '\0';
  return fs::path(buf).parent_path();
}

// NAME in --bin-dir, beside this program (an installed bin/), or in the build tree
// (tools/longhaul-churn/../NAME/NAME).
std::string find_binary(const std::string& bin_dir, const std::string& name) {
  std::vector<fs::path> candidates;
  if (!bin_dir.empty()) candidates.push_back(fs::path(bin_dir) / name);
  const fs::path here = self_dir();
  candidates.push_back(here / name);
  candidates.push_back(here.parent_path() / name / name);
  for (const auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) return c.string();
  return "";
}

int run_churn(const longhaul_churn::Flags& flags, const longhaul_churn::Binaries& bins,
              const std::string& log_dir) {
  longhaul_churn::ChurnRun run(flags, bins, log_dir);
  return run.run();
}

// The train workload: first the churn run, then, in LOG_DIR/reference, the same peers without
// churn for the steps that train on the churn run's tokens (issue 20: the losses compare "at
// equal tokens"; the churn run's group was short while peers were dead or not yet admitted).
// The churn run's final validation loss is judged against the reference's and reported last.
int run_train(const longhaul_churn::Flags& flags, const longhaul_churn::Binaries& bins,
              const std::string& log_dir) {
  longhaul_churn::ChurnRun churn(flags, bins, log_dir);
  if (churn.execute() != 0 || !churn.train_result()) return churn.report_run();
  longhaul_churn::Flags calm = flags;
  calm.kill_interval_ms = 0;
  calm.json = false;  // one JSON line: the churn run's, last
  calm.train_steps = longhaul_churn::equal_token_steps(*churn.train_result(), flags.peers);
  const std::string reference_dir = log_dir + "/reference";
  std::error_code ec;
  fs::create_directories(reference_dir, ec);
  if (ec) {
    churn.fail(3, "cannot create " + reference_dir + ": " + ec.message());
    return churn.report_run();
  }
  longhaul_churn::ChurnRun reference(calm, bins, reference_dir,
                                     longhaul_churn::RunKind::kReference);
  const int reference_status = reference.execute();
  reference.report_run();
  if (reference_status != 0 || !reference.train_result())
    churn.fail(reference_status == 0 ? 3 : reference_status,
               "the churn-free reference run failed (its logs in " + reference_dir + ")");
  else
    churn.judge_loss(*reference.train_result());
  return churn.report_run();
}

}  // namespace

int main(int argc, char** argv) {
  longhaul_churn::Flags flags;
  if (auto exit_status = longhaul_churn::parse_flags(argc, argv, &flags)) return *exit_status;
  ::signal(SIGPIPE, SIG_IGN);
  const bool train = flags.workload == longhaul_churn::Workload::kTrain;
  longhaul_churn::Binaries bins{
      find_binary(flags.bin_dir, "longhaul-master"), find_binary(flags.bin_dir, "longhaul-peer"),
      find_binary(flags.bin_dir, "longhaul-train"), find_binary(flags.bin_dir, "longhaul-wanem")};
  for (const auto& [path, name] :
       {std::pair{bins.master, "longhaul-master"},
        std::pair{train ? bins.train : bins.peer, train ? "longhaul-train" : "longhaul-peer"},
        std::pair{flags.wanem_fraction > 0 ? bins.wanem : std::string("-"), "longhaul-wanem"}}) {
    if (path.empty()) {
      std::fprintf(stderr, "longhaul-churn: cannot find %s (use --bin-dir)\n", name);
      return 3;
    }
  }
  std::string log_dir = flags.log_dir;
  bool temporary = false;
  if (log_dir.empty()) {
    // Under $TMPDIR (temp_directory_path), not a fixed /tmp.
    std::error_code ec;
    std::string tmpl = (fs::temp_directory_path(ec) / "longhaul-churn.XXXXXX").string();
    if (ec || !::mkdtemp(tmpl.data())) {
      std::perror("longhaul-churn: mkdtemp");
      return 3;
    }
    log_dir = tmpl;
    temporary = true;
  } else {
    std::error_code ec;
    fs::create_directories(log_dir, ec);
    if (ec) {
      std::fprintf(stderr, "longhaul-churn: cannot create %s: %s\n", log_dir.c_str(),
                   ec.message().c_str());
      return 3;
    }
  }
  const int status = train ? run_train(flags, bins, log_dir) : run_churn(flags, bins, log_dir);
  if (status == 0 && temporary && !flags.keep_logs) {
    std::error_code ec;
    fs::remove_all(log_dir, ec);
  }
  return status;
}
