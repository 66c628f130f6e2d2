// DiLoCo, Streaming DiLoCo, CO2 and eager through the library's sync engine (longhaul.h): the
// trainer's flat parameter buffer is one range, cut into fragments by fragment_layout.hpp. The
// inner step is the trainer's own (clip + AdamW); the engine syncs after it.
#include <cstdio>

#include "fragment_layout.hpp"
#include "sync_dump.hpp"
#include "sync_method.hpp"

namespace longhaul::train::cli {
namespace {

class EngineMethod final : public SyncMethod {
 public:
  EngineMethod(const Options& o, PeerGroup& group)
      : o_(o),
        group_(group),
        layout_(make_fragment_layout(o.train.model, o.peer.sync.fragments)),
        dump_(o.dump_dir, o.dump_steps) {}
  ~EngineMethod() override { lh_sync_engine_destroy(engine_); }

  Status start(Trainer& trainer) override;
  Result<StepStats> step(Trainer& trainer, const std::vector<std::uint8_t>& shard) override;
  Status global_parameters(Trainer& trainer, std::span<float> out) override;
  SyncCounters counters() override;
  std::optional<lh_sync_stats> engine_stats() override;
  Status save(const RunFiles& files) override;
  Status close() override;
  Result<std::uint64_t> state_hash(Trainer& trainer) override;

 private:
  Status error(lh_status code, const std::string& what) const {
    return Status(code, what + ": " + lh_sync_engine_last_error(engine_));
  }

  const Options& o_;
  PeerGroup& group_;
  Status read_theta_g(std::span<float> out);
  Status dump_theta_g(const std::string& name);

  const FragmentLayout layout_;
  const SyncDump dump_;
  lh_param_range range_{};
  std::string resume_path_;
  lh_sync_engine* engine_ = nullptr;
};

Status EngineMethod::start(Trainer& trainer) {
  std::span<float> params = trainer.model().params();
  range_ = {params.data(), params.size(), LH_DTYPE_F32};
  lh_sync_engine_options e = o_.peer.sync;
  e.ranges = &range_;
  e.range_count = 1;
  e.pieces = layout_.pieces.data();
  e.piece_count = layout_.pieces.size();
  e.method = o_.peer.method == Method::kCo2     ? LH_OUTER_CO2
             : o_.peer.method == Method::kEager ? LH_OUTER_EAGER
                                                : LH_OUTER_DILOCO;
  if (!o_.resume.empty()) {
    resume_path_ = RunFiles::resumed_from(o_.resume).engine;
    e.resume_path = resume_path_.c_str();
  }
  if (lh_status s = lh_sync_engine_start(group_.comm(), &e, &engine_); s != LH_OK)
    return group_.error(s, "starting the sync engine");
  lh_sync_stats stats{};
  (void)lh_sync_engine_get_stats(engine_, &stats);
  const auto group_step = static_cast<std::int64_t>(stats.steps);
  if (dump_.enabled()) LH_RETURN_IF_ERROR(dump_.write("init", trainer.model().params()));
  if (group_step == trainer.step_count()) return Status::ok();
  if (!o_.resume.empty())
    return invalid_argument("the engine's state in " + resume_path_ + " is at step " +
                            std::to_string(group_step) + " but the trainer's checkpoint at " +
                            std::to_string(trainer.step_count()) + ": resume from one checkpoint");
  // A peer that started late took the group's theta_g into its parameters: it trains on from the
  // group's step (learning-rate schedule and data position), with fresh AdamW moments.
  trainer.restore_counters(group_step, static_cast<std::uint64_t>(group_step));
  std::fprintf(stderr, "joined the group at step %lld\n", static_cast<long long>(group_step));
  return Status::ok();
}

Result<StepStats> EngineMethod::step(Trainer& trainer, const std::vector<std::uint8_t>& shard) {
  Result<StepStats> stats = trainer.step(shard);
  if (!stats) return stats;
  const std::int64_t step = trainer.step_count();
  const std::string name = "step-" + std::to_string(step);
  if (dump_.wants(step)) LH_RETURN_IF_ERROR(dump_.write(name + "-local", trainer.model().params()));
  if (lh_status s = lh_sync_engine_step(engine_); s != LH_OK)
    return error(s, "the sync engine's step " + std::to_string(step));
  if (dump_.wants(step)) {
    LH_RETURN_IF_ERROR(dump_theta_g(name + "-global"));
    LH_RETURN_IF_ERROR(dump_.write(name + "-restart", trainer.model().params()));
  }
  return stats;
}

Status EngineMethod::dump_theta_g(const std::string& name) {
  std::vector<float> theta(range_.count);
  LH_RETURN_IF_ERROR(read_theta_g(theta));
  return dump_.write(name, theta);
}

Status EngineMethod::global_parameters(Trainer&, std::span<float> out) {
  return read_theta_g(out);
}

Status EngineMethod::read_theta_g(std::span<float> out) {
  std::vector<float> fragment;
  for (std::uint32_t f = 0; f < layout_.fragment_sizes.size(); ++f) {
    fragment.resize(layout_.fragment_sizes[f]);
    if (lh_status s = lh_sync_engine_get_global(engine_, f, fragment.data(), fragment.size());
        s != LH_OK)
      return error(s, "reading theta_g");
    scatter_fragment(layout_, f, fragment, out);
  }
  return Status::ok();
}

SyncCounters EngineMethod::counters() {
  lh_sync_stats s{};
  (void)lh_sync_engine_get_stats(engine_, &s);
  return {s.blocked_ns,  s.peak_event_bytes, s.rounds_applied,      s.rounds_dropped,
          s.rounds_late, s.retries,          s.sparse_encoded_bytes};
}

std::optional<lh_sync_stats> EngineMethod::engine_stats() {
  lh_sync_stats s{};
  if (lh_sync_engine_get_stats(engine_, &s) != LH_OK) return std::nullopt;  // not started
  return s;
}

Status EngineMethod::save(const RunFiles& files) {
  if (lh_status s = lh_sync_engine_save(engine_, files.engine.c_str()); s != LH_OK)
    return error(s, "saving the engine's state to " + files.engine);
  return Status::ok();
}

Status EngineMethod::close() {
  if (lh_status s = lh_sync_engine_close(engine_); s != LH_OK)
    return error(s, "closing the sync engine");
  return dump_.enabled() ? dump_theta_g("final-global") : Status::ok();
}

Result<std::uint64_t> EngineMethod::state_hash(Trainer&) {
  std::uint64_t hash = 0;
  if (lh_status s = lh_sync_engine_hash(engine_, &hash); s != LH_OK)
    return error(s, "hashing the engine's state");
  return hash;
}

}  // namespace

std::unique_ptr<SyncMethod> make_engine_method(const Options& o, PeerGroup& group) {
  return std::make_unique<EngineMethod>(o, group);
}

}  // namespace longhaul::train::cli
