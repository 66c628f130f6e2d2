// ChurnRun's disruptions and the run's security files.
//
// A disruption (of a whole node or one rank with --nodes: churn_nodes.cpp) picks a stepping peer
// and one of five events with the --mix weights: SIGKILL, SIGTERM, SIGSTOP (SIGCONT later), or a
// fault on the peer's route through longhaul-wanem (every connection other peers opened to it: its
// ring links where it accepts, and state links to it): a reset (both ends get an RST, the ring
// re-forms) or a black hole (nothing moves, nothing closes) healed after --blackhole-ms. A link
// fault drawn for a peer that is not routed goes to a routed one, if any is stepping and not
// black-holed already.
//
// --tls makes one self-signed certificate (openssl) that the master and every peer present;
// --secret one random cluster secret (32 bytes from /dev/urandom, hex, a 0600 file) that all
// prove. Both live in the log directory.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "churn_run.hpp"

namespace longhaul_churn {

void ChurnRun::disrupt() {
  if (nodes()) {
    disrupt_node();
    return;
  }
  std::vector<std::string> candidates = monitor_.disruptable();
  // Keep at least --min-alive peers stepping.
  if (candidates.size() < flags_.min_alive + 1) return;
  std::uniform_int_distribution<size_t> pick(0, candidates.size() - 1);
  const std::string victim = candidates[pick(rng_)];
  PeerProc* p = find_peer(victim);
  if (!p) return;
  const uint32_t signals = flags_.weight_kill + flags_.weight_term + flags_.weight_stop;
  const uint32_t total = signals + flags_.weight_reset + flags_.weight_blackhole;
  const uint32_t r = std::uniform_int_distribution<uint32_t>(0, total - 1)(rng_);
  if (r < signals) {
    act(*p, signal_action(r));
    return;
  }
  if (!p->routed || p->heal_at_ms >= 0) {  // the fault goes to a routed peer that is free
    std::vector<std::string> routed;
    for (const std::string& name : candidates)
      if (PeerProc* q = find_peer(name); q && q->routed && q->heal_at_ms < 0)
        routed.push_back(name);
    if (routed.empty()) return;
    p = find_peer(routed[std::uniform_int_distribution<size_t>(0, routed.size() - 1)(rng_)]);
  }
  fault_link(*p, r >= signals + flags_.weight_reset);
}

ChurnRun::PeerProc* ChurnRun::find_peer(const std::string& name) {
  auto it =
      std::find_if(peers_.begin(), peers_.end(), [&](const auto& p) { return p->name == name; });
  return it == peers_.end() ? nullptr : it->get();
}

ChurnRun::Action ChurnRun::signal_action(uint32_t r) const {
  if (r < flags_.weight_kill) return Action::kKill;
  return r < flags_.weight_kill + flags_.weight_term ? Action::kTerm : Action::kStop;
}

ChurnRun::Action ChurnRun::pick_action() {
  const uint32_t signals = flags_.weight_kill + flags_.weight_term + flags_.weight_stop;
  return signal_action(std::uniform_int_distribution<uint32_t>(0, signals - 1)(rng_));
}

void ChurnRun::act(PeerProc& p, Action action) {
  const double now = now_ms();
  if (action == Action::kKill) {
    append_log(p.name, "churn: SIGKILL");
    monitor_.on_kill(p.name, now);
    p.child->send_signal(SIGKILL);
  } else if (action == Action::kTerm) {
    append_log(p.name, "churn: SIGTERM");
    monitor_.on_term(p.name, now);
    p.child->send_signal(SIGTERM);
    p.leaving = true;
  } else {
    const double ms =
        std::uniform_int_distribution<uint32_t>(flags_.stop_min_ms, flags_.stop_max_ms)(rng_);
    append_log(p.name, "churn: SIGSTOP for " + std::to_string(static_cast<int>(ms)) + " ms");
    monitor_.on_stop(p.name, now);
    p.child->send_signal(SIGSTOP);
    p.resume_at_ms = now + ms;
  }
}

void ChurnRun::fault_link(PeerProc& p, bool blackhole) {
  const double now = now_ms();
  monitor_.on_link_fault(blackhole);
  if (!blackhole) {
    append_log(p.name, "churn: reset of every connection on its route");
    wanem_command("reset " + p.name, [](const std::string&) {});
    return;
  }
  const double ms = std::uniform_int_distribution<uint32_t>(flags_.blackhole_min_ms,
                                                            flags_.blackhole_max_ms)(rng_);
  append_log(p.name,
             "churn: black hole on its route for " + std::to_string(static_cast<int>(ms)) + " ms");
  wanem_command("blackhole " + p.name, [](const std::string&) {});
  p.heal_at_ms = now + ms;
}

// Black holes whose time is up heal (all of them once the churn has ended).
void ChurnRun::heal_links(double now) {
  if (!wanem_ || !wanem_->running()) return;
  for (auto& p : peers_) {
    if (p->heal_at_ms >= 0 && (now >= p->heal_at_ms || phase_ != Phase::kChurn)) {
      p->heal_at_ms = -1;
      append_log(p->name, "churn: heal of its route");
      wanem_command("heal " + p->name, [](const std::string&) {});
    }
  }
}

bool ChurnRun::prepare_security() {
  if (flags_.tls) {
    const std::string cert = log_dir_ + "/tls-cert.pem", key = log_dir_ + "/tls-key.pem";
    const std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=longhaul-churn -keyout '" +
        key + "' -out '" + cert + "' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      shutdown(3, "could not make a TLS certificate with: " + cmd);
      return false;
    }
    for (auto* args : {&master_security_args_, &peer_security_args_})
      args->insert(args->end(), {"--tls-cert", cert, "--tls-key", key});
  }
  if (flags_.secret) {
    const std::string path = log_dir_ + "/secret";
    unsigned char bytes[32];
    std::ifstream random("/dev/urandom", std::ios::binary);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (!random.read(reinterpret_cast<char*>(bytes), sizeof(bytes)) || fd < 0) {
      if (fd >= 0) ::close(fd);
      shutdown(3, "could not make the cluster secret " + path);
      return false;
    }
    char hex[2 * sizeof(bytes) + 2];
    for (size_t i = 0; i < sizeof(bytes); ++i) std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
    hex[2 * sizeof(bytes)] = '\n';
    const bool written = ::write(fd, hex, 2 * sizeof(bytes) + 1) == 2 * sizeof(bytes) + 1;
    ::close(fd);
    if (!written) {
      shutdown(3, "could not write the cluster secret " + path);
      return false;
    }
    for (auto* args : {&master_security_args_, &peer_security_args_})
      args->insert(args->end(), {"--secret-file", path});
  }
  return true;
}

}  // namespace longhaul_churn
