// lh_sync_engine_*: the C face of the sync engine (src/sync).
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "capi/convert.hpp"
#include "capi/handles.hpp"
#include "sync/engine.hpp"

struct lh_sync_engine {
  std::unique_ptr<longhaul::sync::SyncEngine> impl;
  mutable longhaul::Mutex mu;
  std::string last_error GUARDED_BY(mu);
};

namespace {

namespace lh = longhaul;

// Validates every enum crossing the ABI and converts the options (where each range lives is the
// peer's to find: Peer::start_sync_engine).
lh::Result<lh::sync::EngineOptions> convert(const lh_sync_engine_options& o) {
  if (!o.ranges || o.range_count == 0)
    return lh::invalid_argument("the sync engine needs at least one parameter range");
  if (o.piece_count > 0 && !o.pieces) return lh::invalid_argument("piece_count without pieces");
  if (o.method < LH_OUTER_DILOCO || o.method > LH_OUTER_EAGER)
    return lh::invalid_argument(fmt::format("unknown outer method {}", static_cast<int>(o.method)));
  if (o.on_loss < LH_LOSS_RETRY || o.on_loss > LH_LOSS_DROP)
    return lh::invalid_argument(fmt::format("unknown loss policy {}", static_cast<int>(o.on_loss)));
  if (o.codec < LH_CODEC_NONE || o.codec > LH_CODEC_SPARSE)
    return lh::invalid_argument(fmt::format("unknown codec {}", static_cast<int>(o.codec)));
  LH_RETURN_IF_ERROR(lh::capi::check_memory_kind(o.memory));
  lh::sync::EngineOptions e;
  for (size_t i = 0; i < o.range_count; ++i) {
    const lh_param_range& r = o.ranges[i];
    if (r.dtype < LH_DTYPE_F32 || r.dtype > LH_DTYPE_U64)
      return lh::invalid_argument(
          fmt::format("range {}: unknown dtype {}", i, static_cast<int>(r.dtype)));
    e.ranges.push_back(
        {.data = r.data, .count = r.count, .dtype = static_cast<lh::quant::DType>(r.dtype)});
  }
  for (size_t i = 0; i < o.piece_count; ++i)
    e.pieces.push_back(
        {o.pieces[i].fragment, o.pieces[i].range, o.pieces[i].offset, o.pieces[i].count});
  e.fragments = o.fragments;
  e.sync_every = o.sync_every;
  e.delay = o.delay;
  e.method = static_cast<lh::sync::Method>(o.method);
  e.nesterov = {o.outer_lr, o.outer_momentum};
  e.mix = o.mix;
  e.co2 = {o.co2_lr, o.co2_momentum, o.co2_gap_penalty, o.co2_clip};
  // LH_CODEC_SPARSE is no codec of the all-reduce: the engine's sparse path replaces it.
  e.sparse = {o.codec == LH_CODEC_SPARSE, o.topk_per_chunk, o.chunk};
  e.codec = e.sparse.enabled ? lh::quant::Codec::kNone : static_cast<lh::quant::Codec>(o.codec);
  e.block = o.block;
  e.on_loss = static_cast<lh::sync::LossPolicy>(o.on_loss);
  e.max_attempts = o.max_attempts;
  e.deadline = std::chrono::milliseconds(o.deadline_ms);
  e.verify_every = o.verify_every;
  e.adaptive_delay = o.adaptive_delay != 0;
  e.max_staleness_steps = o.max_staleness_steps;
  e.adaptive_deadline = o.adaptive_deadline != 0;
  if (o.resume_path) e.resume_path = o.resume_path;
  return e;
}

// A time on the steady clock as the C API gives it: ns since the clock's epoch, 0 for "none".
uint64_t steady_ns(std::chrono::steady_clock::time_point t) {
  if (t == std::chrono::steady_clock::time_point{}) return 0;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

}  // namespace

extern "C" void lh_sync_engine_options_init(lh_sync_engine_options* o) {
  if (!o) return;
  const lh::sync::EngineOptions d;
  *o = lh_sync_engine_options{};
  o->fragments = d.fragments;
  o->sync_every = d.sync_every;
  o->delay = d.delay;
  o->method = static_cast<lh_outer_method>(d.method);
  o->outer_lr = d.nesterov.lr;
  o->outer_momentum = d.nesterov.momentum;
  o->mix = d.mix;
  o->co2_lr = d.co2.lr;
  o->co2_momentum = d.co2.momentum;
  o->co2_gap_penalty = d.co2.gap_penalty;
  o->co2_clip = d.co2.clip;
  o->codec = static_cast<lh_codec>(d.codec);
  o->block = d.block;
  o->topk_per_chunk = d.sparse.topk_per_chunk;
  o->chunk = d.sparse.chunk;
  o->on_loss = static_cast<lh_loss_policy>(d.on_loss);
  o->max_attempts = d.max_attempts;
  o->deadline_ms = static_cast<uint32_t>(d.deadline.count());
  o->verify_every = d.verify_every;
  o->memory = LH_MEMORY_AUTO;
  o->adaptive_delay = d.adaptive_delay ? 1 : 0;
  o->max_staleness_steps = d.max_staleness_steps;
  o->adaptive_deadline = d.adaptive_deadline ? 1 : 0;
}

extern "C" lh_status lh_sync_engine_start(lh_comm* comm, const lh_sync_engine_options* options,
                                          lh_sync_engine** out) {
  if (!options || !out) return lh::capi::null_argument("lh_sync_engine_start");
  *out = nullptr;
  if (lh_status s = lh::capi::check_open(comm, "lh_sync_engine_start"); s != LH_OK) return s;
  auto converted = convert(*options);
  if (!converted) return lh::capi::finish(comm, converted.status());
  try {
    auto engine = comm->impl->start_sync_engine(std::move(*converted),
                                                lh::capi::memory_kind(options->memory));
    if (!engine) return lh::capi::finish(comm, engine.status());
    *out = new lh_sync_engine{std::move(*engine), {}, {}};
    return LH_OK;
  } catch (const std::bad_alloc&) {
    return lh::capi::finish(comm, lh::Status(LH_ERR_INTERNAL, "out of memory"));
  }
}

extern "C" lh_status lh_sync_engine_step(lh_sync_engine* engine) {
  if (!engine) return lh::capi::null_argument("lh_sync_engine_step");
  return lh::capi::finish(engine, engine->impl->step());
}

extern "C" lh_status lh_sync_engine_close(lh_sync_engine* engine) {
  if (!engine) return lh::capi::null_argument("lh_sync_engine_close");
  return lh::capi::finish(engine, engine->impl->close());
}

extern "C" lh_status lh_sync_engine_save(lh_sync_engine* engine, const char* path) {
  if (!engine || !path) return lh::capi::null_argument("lh_sync_engine_save");
  return lh::capi::finish(engine, engine->impl->save(path));
}

extern "C" void lh_sync_engine_destroy(lh_sync_engine* engine) {
  delete engine;
}

extern "C" lh_status lh_sync_engine_get_stats(const lh_sync_engine* engine, lh_sync_stats* stats) {
  if (!engine || !stats) return lh::capi::null_argument("lh_sync_engine_get_stats");
  const auto s = engine->impl->stats();
  *stats = lh_sync_stats{};
  stats->steps = s.steps;
  stats->rounds_applied = s.rounds_applied;
  stats->rounds_dropped = s.rounds_dropped;
  stats->rounds_late = s.rounds_late;
  stats->deadline_ms = static_cast<uint32_t>(s.deadline.count());
  stats->retries = s.retries;
  stats->non_finite_excluded = s.non_finite_excluded;
  stats->malformed_excluded = s.malformed_excluded;
  stats->sparse_encoded_bytes = s.sparse_encoded_bytes;
  stats->blocked_ns = static_cast<uint64_t>(s.blocked.count());
  stats->peak_event_bytes = s.peak_event_bytes;
  stats->memory_bytes = s.memory_bytes;
  stats->traffic = {s.traffic.data_sent,        s.traffic.data_received, s.traffic.control_sent,
                    s.traffic.control_received, s.traffic.state_sent,    s.traffic.state_received};
  if (s.last_round) {
    stats->last_fragment = s.last_round->fragment;
    stats->last_round = s.last_round->round;
    stats->last_applied = s.last_round->applied ? 1 : 0;
    stats->last_participants = static_cast<uint32_t>(s.last_round->participants);
    stats->last_attempts = s.last_round->attempts;
    stats->last_launched_ns = steady_ns(s.last_round->launched_at);
    stats->last_ready_ns = steady_ns(s.last_round->ready_at);
  }
  stats->delay = s.delay;
  stats->delay_needed = s.delay_needed;
  stats->delay_changes = s.delay_changes;
  stats->sync_time_ns = static_cast<uint64_t>(s.sync_time.count());
  stats->step_time_ns = static_cast<uint64_t>(s.step_time.count());
  stats->slowest_sync_ns = static_cast<uint64_t>(s.slowest_sync.count());
  if (s.in_flight) {
    stats->in_flight = 1;
    stats->in_flight_fragment = s.in_flight->fragment;
    stats->in_flight_round = s.in_flight->round;
    stats->in_flight_apply_step = s.in_flight->apply_step;
    stats->in_flight_launched_ns = steady_ns(s.in_flight->launched_at);
    stats->in_flight_ready = s.in_flight->ready ? 1 : 0;
    stats->in_flight_ready_ns = s.in_flight->ready ? steady_ns(s.in_flight->ready_at) : 0;
  }
  return LH_OK;
}

extern "C" lh_status lh_sync_engine_last_excluded(const lh_sync_engine* engine, uint64_t* ids,
                                                  size_t capacity, size_t* count) {
  if (!engine || !count || (capacity > 0 && !ids))
    return lh::capi::null_argument("lh_sync_engine_last_excluded");
  const auto s = engine->impl->stats();
  *count = 0;
  if (!s.last_round) return LH_OK;
  std::vector<uint64_t> peers = s.last_round->non_finite_peers;
  peers.insert(peers.end(), s.last_round->malformed_peers.begin(),
               s.last_round->malformed_peers.end());
  *count = peers.size();
  std::copy_n(peers.begin(), std::min(capacity, peers.size()), ids);
  return LH_OK;
}

extern "C" lh_status lh_sync_engine_hash(lh_sync_engine* engine, uint64_t* hash) {
  if (!engine || !hash) return lh::capi::null_argument("lh_sync_engine_hash");
  *hash = engine->impl->state_hash();
  return LH_OK;
}

extern "C" lh_status lh_sync_engine_get_global(lh_sync_engine* engine, uint32_t fragment,
                                               float* out, size_t count) {
  if (!engine || (count > 0 && !out)) return lh::capi::null_argument("lh_sync_engine_get_global");
  const auto& layout = engine->impl->layout();
  if (fragment >= layout.fragments() || count != layout.fragment_size(fragment))
    return lh::capi::finish(
        engine, lh::invalid_argument(fmt::format(
                    "fragment {} of {} holds {} elements, not {}", fragment, layout.fragments(),
                    fragment < layout.fragments() ? layout.fragment_size(fragment) : 0, count)));
  const auto global = engine->impl->theta_g(fragment);
  std::copy(global.begin(), global.end(), out);
  return LH_OK;
}

extern "C" const char* lh_sync_engine_last_error(const lh_sync_engine* engine) {
  if (!engine) return "";
  longhaul::MutexLock lock(engine->mu);
  return engine->last_error.c_str();
}
