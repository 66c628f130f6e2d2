// The sync engine: low-communication training across peers (DiLoCo, Streaming DiLoCo, CO2,
// eager) in the library. A trainer registers its parameters and calls step() once after every
// inner optimizer step; the engine keeps the global parameters θ_g and the outer state as shared
// state, sends each fragment's pseudo-gradient every H steps in the background, applies the
// outer update when its round is due, and merges θ_g back into the trainer's parameters. With
// EngineOptions::adaptive_delay it also sizes τ to the measured sync time (docs/overlap.md).
// docs/training.md has every rule and its source; docs/architecture.md where it sits.
//
// Membership: start() is a collective of the group's admitted peers: the first start elects one
// initial θ_g (the popular content, a tie going to the lowest peer id) and every peer adopts it;
// a peer that starts later (a joiner) downloads θ_g, the outer state and the counters and joins
// the schedule where the group is. Every H steps, where no round is in flight, every peer calls
// update_topology at once (the same step everywhere), which admits joiners and re-forms the ring
// without lost peers; a joiner's first contribution is its first whole round.
//
// Failure: a round's all-reduce that fails anywhere fails everywhere (the master decides each
// round for the whole group, so no peer applies a round another dropped); the round is retried
// over the survivors or dropped (EngineOptions::on_loss). Every surviving peer's θ_g stays
// bit-identical. A non-finite contribution is excluded from the mean and reported with its peer.
//
// The sparse codec (EngineOptions::sparse, docs/training.md "Sparse pseudo-gradients"): each
// member encodes its pseudo-gradient with error feedback (its residual is its own, in the
// checkpoint), the members' encodings travel through the sparse all-gather in place of the
// all-reduce, and every member sums the accepted ones in ring order into the same bits. An
// encoding the all-gather's check refuses is excluded like a non-finite contribution and named.
//
// Threads: one trainer thread calls start/step/close; stats() is thread-safe. The engine runs
// its parallel loops on the communicator's runtime workers. The parameters' memory must outlive
// the engine and must not be touched by the trainer during a call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "collective/engine.hpp"
#include "common/mutex.hpp"
#include "peer/collectives.hpp"
#include "peer/group.hpp"
#include "peer/peer_stats.hpp"
#include "peer/settle.hpp"
#include "runtime/worker_pool.hpp"
#include "state/sync.hpp"
#include "sync/checkpoint.hpp"
#include "sync/contribution.hpp"
#include "sync/layout.hpp"
#include "sync/options.hpp"
#include "sync/overlap.hpp"
#include "sync/round_deadline.hpp"
#include "sync/schedule.hpp"
#include "sync/shared_state.hpp"
#include "sync/sparse_encoder.hpp"

namespace longhaul::sync {

struct Round;

struct RoundReport {
  uint32_t fragment = 0;
  uint64_t round = 0;
  bool applied = false;  // false: dropped
  bool late = false;     // dropped at its deadline
  // The deadline it was waited for with (0: none): EngineOptions::deadline, or the adaptive one.
  std::chrono::milliseconds deadline{0};
  uint32_t attempts = 0;
  size_t participants = 0;                 // peers whose contribution was counted
  std::vector<uint64_t> non_finite_peers;  // excluded, by peer id
  std::vector<uint64_t> malformed_peers;   // sparse codec: encodings refused, by peer id
  // The pseudo-gradient's operations of the last attempt, as they count their bytes (payload, no
  // frame headers; the masks' all-reduce left out): the all-reduce, or the sparse all-gather's
  // two steps. `encoded_bytes`: this peer's sparse encoding (0: dense, or nothing to send).
  uint64_t payload_sent = 0;
  uint64_t encoded_bytes = 0;
  uint64_t event_bytes = 0;  // data bytes sent + received by this peer for the round
  // Its (last attempt's) launch and when its result was ready here, for a timeline; the epoch
  // (no time) for a round read from a checkpoint.
  std::chrono::steady_clock::time_point launched_at, ready_at;
};

// The round in flight when step() returned, for a timeline (a trainer draws its time on the
// network): copied at the end of each step, so reading it costs no lock on the trainer's path.
struct InFlightRound {
  uint32_t fragment = 0;
  uint64_t round = 0;
  uint64_t apply_step = 0;
  std::chrono::steady_clock::time_point launched_at;  // the epoch: read from a checkpoint
  bool ready = false;  // its result was seen ready here (polled at the start of a step)
  std::chrono::steady_clock::time_point ready_at;
};

struct EngineStats {
  uint64_t steps = 0;
  uint64_t rounds_applied = 0, rounds_dropped = 0, rounds_late = 0, retries = 0;
  // The deadline the last settled round used (0: none, or no round settled yet); with
  // EngineOptions::adaptive_deadline it follows the group's sync times (round_deadline.hpp).
  std::chrono::milliseconds deadline{0};
  uint64_t non_finite_excluded = 0;  // contributions excluded (any peer's), summed over rounds
  uint64_t malformed_excluded = 0;   // sparse encodings refused (any peer's), likewise
  // This peer's sparse encodings, one per settled round (its last attempt's), summed: what the
  // codec made of its pseudo-gradients before any framing (0 with a dense codec).
  uint64_t sparse_encoded_bytes = 0;
  std::chrono::nanoseconds blocked{0};  // time the trainer waited inside the engine's calls
  uint64_t peak_event_bytes = 0;        // the most event_bytes of one round on this peer
  uint64_t memory_bytes = 0;            // the engine's own buffers
  // The communicator's traffic since the engine started, at the sockets: data (the rounds'
  // all-reduces), control (the master: settling, admission, state-sync planning), state (the
  // shared-state syncs' block transfers).
  peer::TrafficTotals traffic;
  std::optional<RoundReport> last_round;
  // The overlap (docs/overlap.md). `delay`: τ in effect now, the group's (every member the same at
  // the same step); `delay_needed`: the most steps any member reported needing over the last cycle
  // of H steps, which τ was taken from when it is adaptive (0: none reported); `delay_changes`:
  // cycles that began with another τ than the one before. This peer's own measurements:
  // `sync_time`, from its last applied round's launch to its result being ready here, and
  // `step_time`, its trainer's compute time per step (a weighted mean); `slowest_sync`: the
  // longest sync time any member reported in the last round applied.
  uint32_t delay = 0;
  uint32_t delay_needed = 0;
  uint64_t delay_changes = 0;
  std::chrono::nanoseconds sync_time{0}, step_time{0}, slowest_sync{0};
  std::optional<InFlightRound> in_flight;
};

// What the engine runs on: the group's control port, its collectives, its shared-state sync
// and the worker pool its parallel loops use; each must outlive the engine.
struct EngineServices {
  peer::GroupControl* group = nullptr;
  peer::Collectives* collectives = nullptr;
  state::StateSync* state_sync = nullptr;
  runtime::WorkerPool* workers = nullptr;
  // Where the engine posts its progress for the master's status page; null: nowhere.
  peer::StatsBoard* stats_board = nullptr;
};

class SyncEngine {
 public:
  // Validates `options`, builds the layout and shared state, and runs the start collective.
  // The group must be admitted (connected).
  static Result<std::unique_ptr<SyncEngine>> start(const EngineServices& services,
                                                   EngineOptions options);
  ~SyncEngine();

  // Call after every inner optimizer step. Launches, applies and merges what the schedule says,
  // and admits joiners every H steps. Errors: the session failed, the state sync refused this
  // peer (LH_ERR_STATE_MISMATCH), LH_ERR_CLOSED after close().
  Status step();
  // Finishes the round in flight (applies or drops it with the group) and stops. Idempotent.
  Status close();
  // Writes the engine's part of a checkpoint (checkpoint.hpp) to `path`; call it right after a
  // step(), on every peer at the same step. A round in flight is settled with the group first
  // (its all-reduce waited for, its outcome decided) and applied at its scheduled step, so a
  // resume from this file continues exactly. start() resumes from EngineOptions::resume_path.
  Status save(const std::string& path);

  EngineStats stats() const;
  // Inner steps the group has finished (the shared counter).
  uint64_t step_count() const { return state_.step(); }
  // The global parameters of fragment f, and the hash of the whole shared state (every peer's is
  // the same): for tests and checks between calls.
  std::span<const float> theta_g(size_t f) { return state_.theta_g(f); }
  uint64_t state_hash();
  const Layout& layout() const { return layout_; }
  // A fault hook for tests: runs on this peer's sparse encoding of each round (fragment, bytes)
  // before it is sent, so a test can corrupt it. Set between calls; empty: none.
  using EncodingHook = std::function<void(uint32_t fragment, std::span<std::byte> encoding)>;
  void set_encoding_hook(EncodingHook hook) { encoding_hook_ = std::move(hook); }

 private:
  SyncEngine(const EngineServices& services, EngineOptions options, Layout layout,
             FragmentSchedule schedule);

  // Membership (engine_membership.cpp).
  Status join_group();
  Status resume_group(const EngineCheckpoint& checkpoint);
  Status admit();
  // `take_part` false: a member with nothing to sync, which only keeps its node's rails making
  // the same agreements (a peer of no node returns at once).
  Status sync_shared_state(bool take_part = true);
  // The node agreements (docs/protocol.md, "Node agreement"): each kind of point the engine has.
  enum class NodePoint : uint32_t { kRound = 1, kStateSync = 2, kAdmission = 3 };
  Result<bool> any_rail_of_node(NodePoint kind, bool mine);
  // How the engine settles a round with the group (settle.hpp).
  peer::SettlePolicy round_policy() const;
  std::vector<uint64_t> ring_ids() const;

  // The schedule's phases of one step (engine.cpp).
  Status run_step(uint64_t step);
  Status launch_due(uint64_t step);

  // Checkpoints (engine_checkpoint.cpp).
  EngineCheckpoint snapshot() const;
  Status restore(const EngineCheckpoint& checkpoint);

  // Rounds (engine_rounds.cpp).
  bool contributes(uint32_t f) const;
  uint32_t round_identity(const Round& round) const;
  Status form_delta(uint32_t f, bool full_round);
  Status launch(uint32_t f, uint64_t round);
  Status start_ops(Round& round);
  Status wait_for(Round& round);
  // The deadline a round launched now is waited for with (0: none).
  std::chrono::milliseconds round_deadline() const;
  Status settle(Round& round, bool* applied);
  Status attempt(Round& round, uint32_t n);
  Status finish_round(bool restart = true);
  Status settle_ahead(Round& round);
  void log_round(const Round& round, std::string_view what);
  Status apply_diloco(uint32_t f, std::span<const float> average);
  Status apply_delayed(uint32_t f, std::span<const float> average, bool restart);
  void record(const RoundReport& report) EXCLUDES(stats_mu_);

  // The sparse codec (engine_sparse.cpp).
  bool sparse() const { return options_.sparse.enabled; }
  void encode_staged(uint32_t f);
  Status start_sparse(Round& round, const collective::RingView& view);
  static void start_contributions(Round& round, bool wait);
  void wait_sparse_until(Round& round, std::chrono::steady_clock::time_point deadline);
  static Status finish_gather(Round& round);
  Status settle_sparse(Round& round);

  // The overlap (engine_overlap.cpp, docs/overlap.md).
  static void poll(Round& round, std::chrono::steady_clock::time_point now);
  static void mark_ready(Round& round, std::chrono::steady_clock::time_point at);
  std::span<float> reports_of(Round& round) const;
  void take_reports(Round& round) EXCLUDES(stats_mu_);
  void measure(const Round& round) EXCLUDES(stats_mu_);
  void resize_overlap() EXCLUDES(stats_mu_);
  void publish_overlap() REQUIRES(stats_mu_);
  uint32_t delay_cap() const;

  bool delayed() const { return options_.method != Method::kDiLoCo; }

  peer::GroupControl& group_;
  peer::Collectives& collectives_;
  state::StateSync& state_sync_;
  runtime::WorkerPool& workers_;
  peer::StatsBoard* const stats_board_;
  const EngineOptions options_;
  const Layout layout_;
  const FragmentSchedule schedule_;
  SharedState state_;
  std::vector<float> staging_;  // the pseudo-gradient in flight (largest fragment)
  // eager: where this peer's round started, as its deviation from θ_g (e = r − θ_g, over the
  // fragment; 0 for a joiner and at the start: its round starts at θ_g).
  std::vector<float> eager_deviation_;
  std::vector<uint64_t> last_reset_;  // per fragment: the step θ_local was last set from θ_g
  // An applied round said a member saw a change pending: re-form at the next admission point.
  // Not in checkpoints: a group resumes from checkpoints of one step, all without it.
  bool admission_due_ = false;
  // The sparse codec: this peer's residuals and encoding buffer, the staged Δ's encoding (empty:
  // nothing to send), the test's fault hook. Declared before the round that sends from them.
  SparseEncoder sparse_;
  std::span<std::byte> staged_encoding_;
  EncodingHook encoding_hook_;
  std::unique_ptr<Round> in_flight_;
  bool staged_finite_ = true;
  Contribution staged_code_ = Contribution::kNone;  // what the staged Δ contributes
  // This peer's measurement of the last round it finished, sent in the masks of the next round it
  // launches (once: a report is about one round); and its trainer's step time.
  OverlapReport unsent_report_;
  StepClock step_clock_;
  // The applied rounds' fastest sync times, which an adaptive deadline follows (fed whether or
  // not it is on; this peer's own, not in checkpoints).
  RoundDeadline deadline_window_;
  bool closed_ = false;

  peer::TrafficTotals traffic_at_start_;
  mutable Mutex stats_mu_;
  EngineStats stats_ GUARDED_BY(stats_mu_);
};

}  // namespace longhaul::sync
