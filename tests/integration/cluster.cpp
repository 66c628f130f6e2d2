#include "cluster.hpp"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace longhaul::testing {

std::optional<EpochLine> parse_epoch_line(const std::string& line) {
  std::istringstream in(line);
  std::string word, ring;
  EpochLine e;
  in >> word >> e.epoch;
  if (word != "EPOCH") return std::nullopt;
  std::string k1, k2, k3, k4, k5, k6;
  in >> k1 >> e.world >> k2 >> e.groups >> k3 >> e.group_world >> k4 >> e.rank >> k5 >> e.aborts >>
      k6 >> ring;
  if (!in || k6 != "RING") return std::nullopt;
  std::istringstream ids(ring);
  std::string id;
  while (std::getline(ids, id, ',')) e.ring.push_back(std::stoull(id));
  return e;
}

::testing::AssertionResult make_test_certificate(const TempDir& dir, TestCertificate* out) {
  out->cert = dir.path() + "/cert.pem";
  out->key = dir.path() + "/key.pem";
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=localhost -keyout " +
      out->key + " -out " + out->cert + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return ::testing::AssertionFailure() << "failed: " << cmd;
  return ::testing::AssertionSuccess();
}

Cluster::Cluster(std::vector<std::string> master_args) : master_args_(std::move(master_args)) {
  if (auto started = start_master("127.0.0.1:0"); !started) ADD_FAILURE() << started.message();
}

::testing::AssertionResult Cluster::start_master(const std::string& listen) {
  const int start = ++master_starts_;
  const std::string port_file = dir_.path() + "/master" + std::to_string(start) + ".port";
  std::vector<std::string> argv = {LONGHAUL_MASTER_BIN, "--listen",    listen, "--port-file",
                                   port_file,           "--log-level", "info"};
  argv.insert(argv.end(), master_args_.begin(), master_args_.end());
  // Each master's log is kept: the first one's as master.log, restarts' as master2.log, ...
  const std::string log =
      dir_.path() + (start == 1 ? "/master.log" : "/master" + std::to_string(start) + ".log");
  master_ = std::make_unique<Child>(argv, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && master_->running()) {
    std::ifstream in(port_file);
    unsigned p = 0;
    if (in >> p && p > 0) {
      port_ = static_cast<uint16_t>(p);
      return ::testing::AssertionSuccess();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ::testing::AssertionFailure() << "the master did not write its port file; its log:\n"
                                       << master_->stderr_text();
}

::testing::AssertionResult Cluster::restart_master() {
  master_->kill(SIGKILL);
  if (!master_->wait_exit(std::chrono::seconds(10)))
    return ::testing::AssertionFailure() << "the master did not die of SIGKILL";
  return start_master("127.0.0.1:" + std::to_string(port_));
}

Cluster::~Cluster() {
  // Peers first (each killed by its own pid and reaped), then the master.
  peers_.clear();
  if (::testing::Test::HasFailure())
    std::cerr << "---- master log ----\n" << master_->stderr_text() << "\n";
  master_.reset();
}

Child& Cluster::add_peer(std::vector<std::string> args) {
  std::vector<std::string> argv = {LONGHAUL_TEST_PEER_BIN, "--master", master_address()};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = dir_.path() + "/peer" + std::to_string(peers_.size()) + ".log";
  peers_.push_back(std::make_unique<Child>(argv, log));
  return *peers_.back();
}

uint64_t Cluster::peer_id(Child& peer, std::chrono::milliseconds timeout) {
  auto line = peer.wait_line(
      [](const std::string& l) { return l.rfind("ID ", 0) == 0 || l.rfind("ERROR", 0) == 0; },
      timeout);
  if (!line || line->rfind("ID ", 0) != 0) return 0;
  return std::stoull(line->substr(3));
}

::testing::AssertionResult Cluster::wait_agreement(const std::vector<Child*>& peers, int64_t world,
                                                   std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why;
  for (;;) {
    why.clear();
    std::map<Child*, uint64_t> ids;
    std::map<Child*, EpochLine> last;
    for (Child* p : peers) {
      auto id_line = p->last_line("ID ");
      auto e = parse_epoch_line(p->last_line("EPOCH "));
      if (id_line.empty() || !e) {
        why = "a peer has not reported an epoch yet";
        break;
      }
      ids[p] = std::stoull(id_line.substr(3));
      last[p] = *e;
    }
    if (why.empty()) {
      const EpochLine& first = last.begin()->second;
      std::map<std::vector<uint64_t>, std::set<uint64_t>> rings;  // ring -> ids reporting it
      for (auto& [p, e] : last) {
        if (e.epoch != first.epoch || e.world != world) {
          why = "peers disagree: epoch " + std::to_string(e.epoch) + " world " +
                std::to_string(e.world) + " vs epoch " + std::to_string(first.epoch) + " world " +
                std::to_string(first.world) + " (want world " + std::to_string(world) + ")";
          break;
        }
        rings[e.ring].insert(ids[p]);
      }
      if (why.empty()) {
        for (auto& [ring, reporters] : rings) {
          const std::set<uint64_t> members(ring.begin(), ring.end());
          if (members != reporters || members.size() != ring.size())
            why = "a ring does not match its group's peers";
        }
      }
      if (why.empty()) return ::testing::AssertionSuccess();
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string detail;
  for (Child* p : peers)
    detail += "\n  pid " + std::to_string(p->pid()) + ": " + p->last_line("ID ") + " | " +
              p->last_line("EPOCH ") + " | " + p->last_line("ERROR");
  return ::testing::AssertionFailure() << why << detail;
}

}  // namespace longhaul::testing
