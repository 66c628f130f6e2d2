// What longhaul-churn knows about the run: every peer's reports (the key=value lines of
// longhaul-peer, or of longhaul-train --theta-every), what was done to it, and the checks on top:
// state hashes per revision (θ_g hashes per step), hangs, unexpected exits, recovery times after
// kills, and whether the group trains at all (progress_check.hpp). Pure bookkeeping, no I/O: the
// caller passes the time (ms since the start) with every event.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "progress_check.hpp"

namespace longhaul_churn {

struct MonitorLimits {
  double hang_ms = 15000;
  double join_ms = 30000;
  double evict_after_stop_ms = 3000;  // a stop at least this long may get the peer evicted
  ProgressLimits progress{};
};

class RunMonitor {
 public:
  explicit RunMonitor(MonitorLimits limits) : limits_(limits), progress_(limits.progress) {}

  // `rail`: the peer group whose state hashes it reports (nodes), 0 otherwise; `in_node`: a rank
  // of a node, which ends with exit status 4 when its node is evicted.
  void on_spawn(const std::string& peer, double now, uint32_t rail = 0, bool in_node = false);
  // Something was done to another rank of the peer's node: its node may be evicted, so its exit
  // with status 4 (LH_ERR_NODE_EVICTED) is expected.
  void on_node_disrupted(const std::string& peer);
  void on_line(const std::string& peer, const std::string& line, double now);
  void on_kill(const std::string& peer, double now);
  void on_term(const std::string& peer, double now);
  void on_stop(const std::string& peer, double now);
  void on_cont(const std::string& peer, double now);
  // A reset (false) or black hole (true) on a peer's route: counted only; the peers must carry on.
  void on_link_fault(bool blackhole);
  // The peer printed its final summary: it ends on its own, and exit status 0 is expected.
  void on_finished(const std::string& peer);
  // We SIGKILL a peer that has no part in the run any more (a joiner never admitted before the
  // group finished): its death is neither a violation nor a churn kill.
  void on_dismissed(const std::string& peer);
  // exit_status -1: ended by term_signal.
  void on_exit(const std::string& peer, int64_t exit_status, int term_signal, double now);
  // Another process of the run (the master, the emulator) ended when it should not have.
  void on_infrastructure_exit(const std::string& what, int64_t exit_status, int term_signal,
                              double now);
  // The master was restarted on purpose (churn's --master-restart-ms).
  void on_master_restart() { ++s_.master_restarts; }
  // A violation found by the caller (e.g. a survivor that did not leave in time).
  void add_violation(double now, std::string text);
  // The run is being torn down: every peer still running is about to be SIGKILLed by us.
  void on_shutdown();
  // Hangs: running peers without progress, new peers not joined in time; a group that has
  // applied no round for longer than its bound.
  void check_progress(double now);
  // The group stops stepping on purpose (the end of the run): the progress clocks stop.
  void end_progress(double now);
  // The progress check's verdict at the end of a run: stalls, and theta_g's validation loss.
  void finish_progress(double now);

  // The churn has ended: progress checks restart from `now` and, from now on, steps_since_final()
  // counts each peer's steps.
  void begin_final(double now);
  // Peers that are running, joined or not, and have completed no step since begin_final.
  std::vector<std::string> peers_without_final_step() const;

  // Peers that may be disrupted: running, joined, not stopped, not already signalled.
  std::vector<std::string> disruptable() const;
  // Peers that are running and have not joined.
  std::vector<std::string> not_joined() const;
  bool is_running(const std::string& peer) const;
  size_t running() const;
  size_t stopped() const;
  size_t joined_running() const;

  struct Summary {
    uint64_t group_steps = 0;  // the highest revision (train: step) any peer reached
    uint64_t peer_steps = 0;   // STEP (train: THETA) lines from all peers
    // Train: the sum over the group's steps of the group's size at that step (the most any peer
    // reported there), times the steps since the previous reported one: the batches trained.
    uint64_t world_steps = 0;
    uint64_t spawned = 0, joins = 0, kills = 0, terms = 0, stops = 0, evicted_after_stop = 0;
    uint64_t node_evictions = 0;  // ranks that ended with their node evicted (exit status 4)
    uint64_t link_resets = 0, blackholes = 0;
    uint64_t master_restarts = 0;
    uint64_t aborted_ops = 0;   // all-reduce steps that failed and were retried
    uint64_t sync_retries = 0;  // syncs that failed and were retried
    uint64_t hashes_compared = 0;
    std::vector<double> recoveries_ms;
    uint64_t unrecovered = 0;  // kills with no recovery by the end of the run
    double recovery_p50_ms = 0, recovery_p99_ms = 0, recovery_max_ms = 0;
    ProgressFigures progress;
    uint64_t progress_violations = 0;  // of the violations, those of the progress check
  };
  Summary summary() const;
  uint64_t group_steps() const { return s_.group_steps; }
  const std::vector<std::string>& violations() const { return violations_; }
  // The last lines of a peer's stdout, for reports.
  std::string tail(const std::string& peer) const;

 private:
  enum class Fate { kNone, kKilled, kTermed };
  struct Peer {
    double started_ms = 0;
    bool joined = false;
    int64_t id = -1;
    double progress_ms = 0;  // the last step, join, start or resume
    uint64_t rev = 0;
    bool stopped = false;
    double stopped_at_ms = 0;
    double longest_stop_ms = 0;
    Fate fate = Fate::kNone;
    bool exited = false;
    bool hang_reported = false;
    bool finished = false;  // printed its final summary
    uint32_t rail = 0;
    bool in_node = false;
    bool node_disrupted = false;  // another rank of its node was disrupted
    uint64_t steps_since_final = 0;
    // The count of rounds it reported last (-1: none yet), and at which step (revision).
    int64_t rounds = -1;
    uint64_t rounds_key = 0;
    std::deque<std::string> last_lines;
  };
  struct PendingRecovery {
    double killed_ms;
    int64_t epoch;
    std::string victim;
  };
  struct RevisionRecord {
    std::string hash;
    std::string peer;
    uint64_t world = 0;   // the largest group size reported with it
    uint64_t rounds = 0;  // the rounds a member was seen to apply at this step
  };
  // A reported hash: of the state at a revision (longhaul-peer's STEP), or of θ_g after a step
  // (longhaul-train's THETA).
  struct Report {
    uint64_t key = 0;
    std::string hash;
    int64_t epoch = 0;
    uint64_t world = 0;
    // The reporter's count of rounds applied so far (longhaul-peer: the group's updates applied;
    // longhaul-train: its method's rounds applied); absent in a line without one.
    std::optional<uint64_t> rounds;
  };

  Peer* find(const std::string& peer);
  void violation(double now, const std::string& text);
  void on_report(const std::string& peer, Peer& p, const Report& r, bool theta, double now);
  void count_rounds(Peer& p, const Report& r, RevisionRecord& record, double now);
  void progress_violations(double now, const std::vector<std::string>& texts);

  MonitorLimits limits_;
  std::map<std::string, Peer> peers_;
  // By (rail, revision), or (train) by (0, step): each rail is its own peer group.
  std::map<std::pair<uint32_t, uint64_t>, RevisionRecord> revisions_;
  std::vector<PendingRecovery> pending_recoveries_;
  int64_t max_epoch_ = 0;
  bool final_ = false;
  ProgressCheck progress_;
  double now_ms_ = 0;  // the latest time passed in: summary()'s figures are as of then
  Summary s_;
  std::vector<std::string> violations_;
};

// "key=value key=\"quoted value\" ..." after a leading word; values keep their quotes stripped.
std::map<std::string, std::string> parse_fields(const std::string& line);

}  // namespace longhaul_churn
