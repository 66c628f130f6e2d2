// The packet lab of a churn run (--sites): every peer and the master in network namespaces joined
// by longhaul-wanem's packet forwarder, so their TCP sees real round trips (docs/wanlab.md).
#include <signal.h>

#include <sstream>

#include "churn_run.hpp"

namespace longhaul_churn {
namespace {

std::string ms(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

void ChurnRun::start_lab() {
  std::vector<std::string> argv = {bins_.wanem,
                                   "--seed",
                                   std::to_string(flags_.seed),
                                   "--jitter-ms",
                                   ms(flags_.jitter_ms),
                                   "--rate-mbit",
                                   ms(flags_.rate_mbit),
                                   "--site",
                                   "master"};
  for (const Flags::Site& s : flags_.sites) {
    argv.insert(argv.end(), {"--site", s.name, "--path",
                             "master-" + s.name + ",latency_ms=" + ms(s.one_way_ms)});
  }
  for (size_t i = 0; i < flags_.sites.size(); ++i)
    for (size_t j = i + 1; j < flags_.sites.size(); ++j)
      argv.insert(argv.end(),
                  {"--path", flags_.sites[i].name + "-" + flags_.sites[j].name + ",latency_ms=" +
                                 ms(flags_.sites[i].one_way_ms + flags_.sites[j].one_way_ms)});
  std::string error;
  wanem_ = ChildProcess::spawn(
      &loop_, argv, log_path("wanlab", ".err"), true,
      [this](const std::string& line) { on_wanem_line(line); },
      [this](int64_t status, int sig) {
        if (phase_ != Phase::kShutdown) {
          monitor_.on_infrastructure_exit("the packet lab (longhaul-wanem)", status, sig, now_ms());
          shutdown(1, "the packet lab exited (see wanlab.err; it needs root)");
        }
      },
      &error);
  if (!wanem_) {
    shutdown(3, error);
    return;
  }
  append_log("wanem", "packet lab started pid " + std::to_string(wanem_->pid()));
  phase_deadline_ms_ = now_ms() + 30000;
}

// "SITE NAME NETNS ADDRESS" lines, then READY: the master starts in its site.
void ChurnRun::on_site_line(const std::string& line) {
  std::istringstream in(line);
  std::string word, name, netns, address;
  in >> word >> name >> netns >> address;
  if (word == "SITE") site_hosts_[name] = {netns, address};
  if (word == "READY" && !master_) start_master();
}

const std::pair<std::string, std::string>& ChurnRun::next_peer_site() {
  const Flags::Site& site = flags_.sites[sited_count_++ % flags_.sites.size()];
  return site_hosts_.at(site.name);
}

}  // namespace longhaul_churn
