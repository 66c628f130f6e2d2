#include "run_monitor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace longhaul_churn {

namespace {

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1fs", ms / 1000.0);
  return buf;
}

std::string word(const std::string& line) {
  return line.substr(0, line.find(' '));
}

uint64_t to_u64(const std::map<std::string, std::string>& f, const char* key) {
  auto it = f.find(key);
  return it == f.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

std::optional<uint64_t> maybe_u64(const std::map<std::string, std::string>& f, const char* key) {
  if (f.find(key) == f.end()) return std::nullopt;
  return to_u64(f, key);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

std::map<std::string, std::string> parse_fields(const std::string& line) {
  std::map<std::string, std::string> out;
  size_t i = line.find(' ');
  while (i != std::string::npos && i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    const size_t eq = line.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = line.substr(i, eq - i);
    size_t end;
    std::string value;
    if (eq + 1 < line.size() && line[eq + 1] == '"') {
      end = line.find('"', eq + 2);
      if (end == std::string::npos) end = line.size();
      value = line.substr(eq + 2, end - eq - 2);
      ++end;
    } else {
      end = line.find(' ', eq + 1);
      if (end == std::string::npos) end = line.size();
      value = line.substr(eq + 1, end - eq - 1);
    }
    out[std::move(key)] = std::move(value);
    i = end;
  }
  return out;
}

RunMonitor::Peer* RunMonitor::find(const std::string& peer) {
  auto it = peers_.find(peer);
  return it == peers_.end() ? nullptr : &it->second;
}

void RunMonitor::violation(double now, const std::string& text) {
  violations_.push_back("[" + format_ms(now) + "] " + text);
}

void RunMonitor::add_violation(double now, std::string text) {
  violation(now, text);
}

void RunMonitor::on_spawn(const std::string& peer, double now, uint32_t rail, bool in_node) {
  Peer p;
  p.started_ms = now;
  p.progress_ms = now;
  p.rail = rail;
  p.in_node = in_node;
  peers_[peer] = p;
  ++s_.spawned;
}

void RunMonitor::on_line(const std::string& peer, const std::string& line, double now) {
  now_ms_ = std::max(now_ms_, now);
  Peer* p = find(peer);
  if (!p) return;
  p->last_lines.push_back(line);
  if (p->last_lines.size() > 6) p->last_lines.pop_front();
  const std::string kind = word(line);
  if (kind == "JOINED") {
    const auto f = parse_fields(line);
    p->joined = true;
    p->id = static_cast<int64_t>(to_u64(f, "id"));
    p->progress_ms = now;
    max_epoch_ = std::max<int64_t>(max_epoch_, static_cast<int64_t>(to_u64(f, "epoch")));
    ++s_.joins;
    // longhaul-train says how many steps apart its rounds are; each longhaul-peer step is one.
    progress_.on_join(p->rail, maybe_u64(f, "round_every").value_or(1), now);
    // The baseline of its count of rounds. longhaul-peer's is the group's, 0 at revision 0 (a
    // newcomer's first report, at a later revision, is then a baseline of its own).
    // longhaul-train's (JOINED says its step) is its first THETA: a replacement's engine has
    // already applied the round of the step it joined at, which the members reported there.
    p->rounds = f.count("step") ? -1 : 0;
    p->rounds_key = 0;
  } else if (kind == "TOPOLOGY") {
    max_epoch_ =
        std::max<int64_t>(max_epoch_, static_cast<int64_t>(to_u64(parse_fields(line), "epoch")));
  } else if (kind == "RETRY") {
    const auto f = parse_fields(line);
    (f.count("phase") && f.at("phase") == "sync" ? s_.sync_retries : s_.aborted_ops)++;
  } else if (kind == "STEP" || kind == "THETA") {
    const auto f = parse_fields(line);
    const bool theta = kind == "THETA";
    on_report(peer, *p,
              Report{to_u64(f, theta ? "step" : "rev"), f.count("hash") ? f.at("hash") : "",
                     static_cast<int64_t>(to_u64(f, "epoch")), to_u64(f, "world"),
                     maybe_u64(f, theta ? "rounds" : "applied")},
              theta, now);
  } else if (kind == "VAL") {
    const auto f = parse_fields(line);
    if (f.count("loss"))
      progress_.on_val(to_u64(f, "step"), std::strtod(f.at("loss").c_str(), nullptr));
  }
}

void RunMonitor::on_report(const std::string& peer, Peer& p, const Report& r, bool theta,
                           double now) {
  p.progress_ms = now;
  p.rev = r.key;
  p.hang_reported = false;
  ++p.steps_since_final;
  ++s_.peer_steps;
  s_.group_steps = std::max(s_.group_steps, r.key);
  max_epoch_ = std::max(max_epoch_, r.epoch);
  auto [it, inserted] =
      revisions_.try_emplace({p.rail, r.key}, RevisionRecord{r.hash, peer, r.world});
  if (!inserted) {
    ++s_.hashes_compared;
    it->second.world = std::max(it->second.world, r.world);
    if (it->second.hash != r.hash)
      violation(now,
                (theta ? "theta_g divergence after step " + std::to_string(r.key)
                       : "state divergence at revision " + std::to_string(r.key) + " (step " +
                             std::to_string(r.key - 1) + ", rail " + std::to_string(p.rail) + ")") +
                    ": " + it->second.peer + " has hash " + it->second.hash + ", " + peer +
                    " has hash " + r.hash + " (epoch " + std::to_string(r.epoch) + ")");
  }
  progress_.on_step(p.rail, r.key, now);
  if (r.rounds) count_rounds(p, r, it->second, now);
  // A survivor completed a step in an epoch after the kill: the group has re-formed without the
  // victim and reduces again.
  for (auto k = pending_recoveries_.begin(); k != pending_recoveries_.end();) {
    if (k->victim != peer && r.epoch > k->epoch) {
      s_.recoveries_ms.push_back(now - k->killed_ms);
      k = pending_recoveries_.erase(k);
    } else {
      ++k;
    }
  }
}

// Rounds are the group's: every member applies a round at the same step (theta_g, in the hash,
// would differ otherwise), so the rounds a member applied between two reports of consecutive
// steps were applied at the later one, and each step counts the most any member applied there. A
// report after a gap (a newcomer's first, a member that skipped revisions) only sets a baseline.
void RunMonitor::count_rounds(Peer& p, const Report& r, RevisionRecord& record, double now) {
  const auto count = static_cast<int64_t>(*r.rounds);
  uint64_t added = 0;
  if (p.rounds >= 0 && p.rounds_key + 1 == r.key && count > p.rounds) {
    const auto applied = static_cast<uint64_t>(count - p.rounds);
    if (applied > record.rounds) {
      added = applied - record.rounds;
      record.rounds = applied;
    }
  }
  p.rounds = count;
  p.rounds_key = r.key;
  progress_.on_rounds(p.rail, added, now);
}

void RunMonitor::on_node_disrupted(const std::string& peer) {
  if (Peer* p = find(peer)) p->node_disrupted = true;
}

void RunMonitor::on_kill(const std::string& peer, double now) {
  Peer* p = find(peer);
  if (!p) return;
  p->fate = Fate::kKilled;
  ++s_.kills;
  if (p->joined) pending_recoveries_.push_back({now, max_epoch_, peer});
}

void RunMonitor::on_term(const std::string& peer, double now) {
  Peer* p = find(peer);
  if (!p) return;
  (void)now;
  p->fate = Fate::kTermed;
  ++s_.terms;
}

void RunMonitor::on_stop(const std::string& peer, double now) {
  Peer* p = find(peer);
  if (!p) return;
  p->stopped = true;
  p->stopped_at_ms = now;
  ++s_.stops;
}

void RunMonitor::on_cont(const std::string& peer, double now) {
  Peer* p = find(peer);
  if (!p || !p->stopped) return;
  p->stopped = false;
  p->longest_stop_ms = std::max(p->longest_stop_ms, now - p->stopped_at_ms);
  p->progress_ms = now;  // the time it was stopped does not count against it
}

void RunMonitor::on_link_fault(bool blackhole) {
  ++(blackhole ? s_.blackholes : s_.link_resets);
}

void RunMonitor::on_finished(const std::string& peer) {
  if (Peer* p = find(peer)) p->finished = true;
}

void RunMonitor::on_dismissed(const std::string& peer) {
  if (Peer* p = find(peer)) p->fate = Fate::kKilled;
}

void RunMonitor::on_exit(const std::string& peer, int64_t exit_status, int term_signal,
                         double now) {
  Peer* p = find(peer);
  if (!p) return;
  p->exited = true;
  const std::string how = exit_status < 0 ? "signal " + std::to_string(term_signal)
                                          : "exit status " + std::to_string(exit_status);
  // Exit status 4: its node was evicted, as it must be when another of its ranks died, stalled
  // or left (or this one was told to leave, or to die, while its node was already going: the
  // eviction can end it before our signal lands).
  constexpr int64_t kNodeEvicted = 4;
  if (exit_status == kNodeEvicted && p->in_node &&
      (p->node_disrupted || p->fate == Fate::kTermed)) {
    ++s_.node_evictions;
    return;
  }
  switch (p->fate) {
    case Fate::kKilled:
      if (exit_status < 0 && term_signal == 9) return;
      violation(now, peer + " was SIGKILLed but ended with " + how);
      return;
    case Fate::kTermed:
      if (exit_status == 0) return;
      violation(
          now, peer + " did not leave cleanly on SIGTERM: " + how + "; last lines:\n" + tail(peer));
      return;
    case Fate::kNone:
      if (p->finished && exit_status == 0) return;
      break;
  }
  if (p->longest_stop_ms >= limits_.evict_after_stop_ms || p->stopped) {
    ++s_.evicted_after_stop;  // stopped past the master's failure detection: evicted, as it should
                              // be
    return;
  }
  violation(now, peer + " (peer id " + std::to_string(p->id) + ", revision " +
                     std::to_string(p->rev) + ") crashed: " + how + "; last lines:\n" + tail(peer));
}

void RunMonitor::on_infrastructure_exit(const std::string& what, int64_t exit_status,
                                        int term_signal, double now) {
  violation(now, what + " exited unexpectedly: " +
                     (exit_status < 0 ? "signal " + std::to_string(term_signal)
                                      : "exit status " + std::to_string(exit_status)));
}

void RunMonitor::on_shutdown() {
  for (auto& [name, p] : peers_)
    if (!p.exited) p.fate = Fate::kKilled;
}

void RunMonitor::check_progress(double now) {
  now_ms_ = std::max(now_ms_, now);
  progress_violations(now, progress_.check(now));
  for (auto& [name, p] : peers_) {
    if (p.exited || p.stopped || p.finished || p.fate != Fate::kNone || p.hang_reported) continue;
    if (!p.joined && now - p.started_ms > limits_.join_ms) {
      p.hang_reported = true;
      violation(now, name + " has not joined " + format_ms(now - p.started_ms) +
                         " after it started; last lines:\n" + tail(name));
    } else if (p.joined && now - p.progress_ms > limits_.hang_ms) {
      p.hang_reported = true;
      violation(now, name + " (peer id " + std::to_string(p.id) + ") hangs: no step for " +
                         format_ms(now - p.progress_ms) + " after revision " +
                         std::to_string(p.rev) + " (step " +
                         std::to_string(p.rev == 0 ? 0 : p.rev - 1) + "); last lines:\n" +
                         tail(name));
    }
  }
}

void RunMonitor::progress_violations(double now, const std::vector<std::string>& texts) {
  for (const std::string& text : texts) {
    violation(now, text);
    ++s_.progress_violations;
  }
}

void RunMonitor::end_progress(double now) {
  now_ms_ = std::max(now_ms_, now);
  progress_.end(now);
}

void RunMonitor::finish_progress(double now) {
  now_ms_ = std::max(now_ms_, now);
  progress_violations(now, progress_.finish(now));
}

void RunMonitor::begin_final(double now) {
  final_ = true;
  for (auto& [name, p] : peers_) {
    p.steps_since_final = 0;
    if (!p.exited) p.progress_ms = std::max(p.progress_ms, now);
  }
  // Kills this close to the end may not have had time to recover; they count as unrecovered only
  // if the grace period passes without it.
}

std::vector<std::string> RunMonitor::peers_without_final_step() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : peers_)
    if (!p.exited && p.fate == Fate::kNone && p.steps_since_final == 0) out.push_back(name);
  return out;
}

std::vector<std::string> RunMonitor::disruptable() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : peers_)
    if (!p.exited && p.joined && !p.stopped && p.fate == Fate::kNone && p.rev > 0)
      out.push_back(name);
  return out;
}

std::vector<std::string> RunMonitor::not_joined() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : peers_)
    if (!p.exited && !p.joined) out.push_back(name);
  return out;
}

bool RunMonitor::is_running(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it != peers_.end() && !it->second.exited;
}

size_t RunMonitor::running() const {
  return static_cast<size_t>(std::count_if(peers_.begin(), peers_.end(),
                                           [](const auto& kv) { return !kv.second.exited; }));
}

size_t RunMonitor::stopped() const {
  return static_cast<size_t>(std::count_if(peers_.begin(), peers_.end(), [](const auto& kv) {
    return !kv.second.exited && kv.second.stopped;
  }));
}

size_t RunMonitor::joined_running() const {
  return static_cast<size_t>(std::count_if(peers_.begin(), peers_.end(), [](const auto& kv) {
    return !kv.second.exited && kv.second.joined && kv.second.fate == Fate::kNone;
  }));
}

RunMonitor::Summary RunMonitor::summary() const {
  Summary s = s_;
  uint64_t previous = 0;
  for (const auto& [key, record] : revisions_) {
    if (key.first != 0) continue;  // world steps are the train workload's (one rail)
    s.world_steps += record.world * (key.second - previous);
    previous = key.second;
  }
  s.unrecovered = pending_recoveries_.size();
  s.recovery_p50_ms = percentile(s.recoveries_ms, 0.50);
  s.recovery_p99_ms = percentile(s.recoveries_ms, 0.99);
  s.recovery_max_ms = s.recoveries_ms.empty()
                          ? 0
                          : *std::max_element(s.recoveries_ms.begin(), s.recoveries_ms.end());
  s.progress = progress_.figures(now_ms_);
  return s;
}

std::string RunMonitor::tail(const std::string& peer) const {
  auto it = peers_.find(peer);
  if (it == peers_.end()) return "";
  std::string out;
  for (const auto& l : it->second.last_lines) out += "    " + l + "\n";
  return out;
}

}  // namespace longhaul_churn
