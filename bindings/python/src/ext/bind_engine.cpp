// Python bindings of the sync engine.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "comm.hpp"
#include "engine.hpp"
#include "errors.hpp"
#include "tensors.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace longhaul::py {
namespace {

lh_outer_method parse_method(const std::string& s) {
  if (s == "diloco" || s == "nesterov") return LH_OUTER_DILOCO;
  if (s == "co2") return LH_OUTER_CO2;
  if (s == "eager") return LH_OUTER_EAGER;
  throw nb::value_error(("method must be 'diloco', 'co2' or 'eager', not '" + s + "'").c_str());
}

lh_loss_policy parse_loss(const std::string& s) {
  if (s == "retry") return LH_LOSS_RETRY;
  if (s == "drop") return LH_LOSS_DROP;
  throw nb::value_error(("on_loss must be 'retry' or 'drop', not '" + s + "'").c_str());
}

// pieces: a sequence of (fragment, range, offset, count) tuples.
std::vector<lh_fragment_piece> parse_pieces(nb::handle pieces) {
  std::vector<lh_fragment_piece> out;
  if (pieces.is_none()) return out;
  for (nb::handle p : pieces) {
    auto t = nb::cast<std::tuple<uint32_t, uint32_t, size_t, size_t>>(p);
    out.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t), std::get<3>(t)});
  }
  return out;
}

struct EngineArgs {
  std::optional<uint32_t> fragments, sync_every, delay;
  std::string method;
  std::optional<float> outer_lr, outer_momentum, mix, co2_lr, co2_momentum, co2_gap_penalty,
      co2_clip;
  nb::object quant;
  std::optional<uint32_t> block;
  std::string on_loss;
  std::optional<uint32_t> max_attempts, deadline_ms, verify_every;
  std::optional<std::string> resume_path;
  std::optional<uint32_t> topk_per_chunk, chunk;
  std::optional<bool> adaptive_deadline;
};

// quant="sparse" is the engine's own codec (no all-reduce takes it); the others are the
// all-reduce's. topk_per_chunk and chunk belong to it alone.
lh_codec engine_codec(const EngineArgs& a) {
  const bool sparse =
      nb::isinstance<nb::str>(a.quant) && nb::cast<std::string>(a.quant) == "sparse";
  if (!sparse && (a.topk_per_chunk || a.chunk))
    throw nb::value_error("topk_per_chunk and chunk are settings of quant='sparse'");
  return sparse ? LH_CODEC_SPARSE : parse_codec(a.quant);
}

lh_sync_engine_options engine_options(const EngineArgs& a) {
  lh_sync_engine_options o;
  lh_sync_engine_options_init(&o);
  set_if(o.fragments, a.fragments);
  set_if(o.sync_every, a.sync_every);
  set_if(o.delay, a.delay);
  o.method = parse_method(a.method);
  set_if(o.outer_lr, a.outer_lr);
  set_if(o.outer_momentum, a.outer_momentum);
  set_if(o.mix, a.mix);
  set_if(o.co2_lr, a.co2_lr);
  set_if(o.co2_momentum, a.co2_momentum);
  set_if(o.co2_gap_penalty, a.co2_gap_penalty);
  set_if(o.co2_clip, a.co2_clip);
  o.codec = engine_codec(a);
  set_if(o.block, a.block);
  set_if(o.topk_per_chunk, a.topk_per_chunk);
  set_if(o.chunk, a.chunk);
  o.on_loss = parse_loss(a.on_loss);
  set_if(o.max_attempts, a.max_attempts);
  set_if(o.deadline_ms, a.deadline_ms);
  if (a.adaptive_deadline) o.adaptive_deadline = *a.adaptive_deadline ? 1 : 0;
  set_if(o.verify_every, a.verify_every);
  if (a.resume_path) o.resume_path = a.resume_path->c_str();
  return o;
}

nb::dict stats_dict(const lh_sync_stats& s) {
  nb::dict d;
  d["steps"] = s.steps;
  d["rounds_applied"] = s.rounds_applied;
  d["rounds_dropped"] = s.rounds_dropped;
  d["rounds_late"] = s.rounds_late;
  d["deadline_ms"] = s.deadline_ms;
  d["retries"] = s.retries;
  d["non_finite_excluded"] = s.non_finite_excluded;
  d["malformed_excluded"] = s.malformed_excluded;
  d["sparse_encoded_bytes"] = s.sparse_encoded_bytes;
  d["blocked_ns"] = s.blocked_ns;
  d["peak_event_bytes"] = s.peak_event_bytes;
  d["memory_bytes"] = s.memory_bytes;
  d["data_sent"] = s.traffic.data_sent;
  d["data_received"] = s.traffic.data_received;
  d["control_sent"] = s.traffic.control_sent;
  d["control_received"] = s.traffic.control_received;
  d["state_sent"] = s.traffic.state_sent;
  d["state_received"] = s.traffic.state_received;
  d["last_fragment"] = s.last_fragment;
  d["last_round"] = s.last_round;
  d["last_applied"] = s.last_applied != 0;
  d["last_participants"] = s.last_participants;
  d["last_attempts"] = s.last_attempts;
  // The overlap (docs/overlap.md, "What it reports").
  d["delay"] = s.delay;
  d["delay_needed"] = s.delay_needed;
  d["delay_changes"] = s.delay_changes;
  d["sync_time_ns"] = s.sync_time_ns;
  d["step_time_ns"] = s.step_time_ns;
  d["slowest_sync_ns"] = s.slowest_sync_ns;
  return d;
}

}  // namespace

void bind_engine(nb::module_& m) {
  nb::class_<SyncEngine>(m, "SyncEngine", doc::engine)
      .def(
          "__init__",
          [](SyncEngine* self, nb::object comm, nb::object params,
             std::optional<uint32_t> fragments, std::optional<uint32_t> sync_every,
             std::optional<uint32_t> delay, std::string method, std::optional<float> outer_lr,
             std::optional<float> outer_momentum, std::optional<float> mix,
             std::optional<float> co2_lr, std::optional<float> co2_momentum,
             std::optional<float> co2_gap_penalty, std::optional<float> co2_clip, nb::object quant,
             std::optional<uint32_t> block, std::string on_loss,
             std::optional<uint32_t> max_attempts, std::optional<uint32_t> deadline_ms,
             std::optional<bool> adaptive_deadline, std::optional<uint32_t> verify_every,
             std::optional<std::string> resume_path, nb::object pieces,
             std::optional<uint32_t> topk_per_chunk, std::optional<uint32_t> chunk) {
            const EngineArgs a{fragments,
                               sync_every,
                               delay,
                               std::move(method),
                               outer_lr,
                               outer_momentum,
                               mix,
                               co2_lr,
                               co2_momentum,
                               co2_gap_penalty,
                               co2_clip,
                               std::move(quant),
                               block,
                               std::move(on_loss),
                               max_attempts,
                               deadline_ms,
                               verify_every,
                               std::move(resume_path),
                               topk_per_chunk,
                               chunk,
                               adaptive_deadline};
            if (!nb::isinstance<Communicator>(comm))
              throw nb::type_error("comm must be a longhaul.Communicator");
            new (self) SyncEngine(comm, params, engine_options(a), parse_pieces(pieces));
          },
          "comm"_a, "params"_a, nb::kw_only(), "fragments"_a = nb::none(),
          "sync_every"_a = nb::none(), "delay"_a = nb::none(), "method"_a = "diloco",
          "outer_lr"_a = nb::none(), "outer_momentum"_a = nb::none(), "mix"_a = nb::none(),
          "co2_lr"_a = nb::none(), "co2_momentum"_a = nb::none(), "co2_gap_penalty"_a = nb::none(),
          "co2_clip"_a = nb::none(), "quant"_a = nb::none(), "block"_a = nb::none(),
          "on_loss"_a = "retry", "max_attempts"_a = nb::none(), "deadline_ms"_a = nb::none(),
          "adaptive_deadline"_a = nb::none(), "verify_every"_a = nb::none(),
          "resume_path"_a = nb::none(), "pieces"_a = nb::none(), "topk_per_chunk"_a = nb::none(),
          "chunk"_a = nb::none(),
          nb::sig(
              "def __init__(self, comm: Communicator, params: "
              "collections.abc.Sequence[longhaul.DLPackTensor], *, "
              "fragments: int | None = None, sync_every: int | None = None, delay: int | None = "
              "None, "
              "method: str = 'diloco', outer_lr: float | None = None, outer_momentum: float | None "
              "= None, "
              "mix: float | None = None, co2_lr: float | None = None, co2_momentum: float | None = "
              "None, "
              "co2_gap_penalty: float | None = None, co2_clip: float | None = None, "
              "quant: str | None = None, block: int | None = None, on_loss: str = 'retry', "
              "max_attempts: int | None = None, deadline_ms: int | None = None, "
              "adaptive_deadline: bool | None = None, verify_every: int | None = None, "
              "resume_path: str | None = None, "
              "pieces: collections.abc.Sequence[tuple[int, int, int, int]] | None = None, "
              "topk_per_chunk: int | None = None, chunk: int | None = None) -> None"),
          doc::engine_init)
      .def("step", &SyncEngine::step,
           "Call after every inner optimizer step: launches, applies and merges the rounds that "
           "are due (GIL released). Lost peers are not errors; a failed session raises.")
      .def("close", &SyncEngine::close,
           "Settles the round in flight with the group and stops; call on every peer at the same "
           "step. Later steps raise Closed. Idempotent.")
      .def("save", &SyncEngine::save, "path"_a,
           "Writes the engine's checkpoint to `path` (atomically); call right after step() on "
           "every peer at the same step.")
      .def("hash", &SyncEngine::hash,
           "The hash of the shared state (global parameters, outer state, counters): the same on "
           "every peer of the group between the same steps.")
      .def(
          "stats", [](const SyncEngine& e) { return stats_dict(e.stats()); },
          nb::sig("def stats(self) -> dict[str, int | bool]"),
          "Rounds applied/dropped/late, retries, blocked time, traffic, the last round, and the "
          "overlap: delay (tau), delay_needed, delay_changes, sync_time_ns, step_time_ns, "
          "slowest_sync_ns (include/longhaul/longhaul.h, lh_sync_stats; docs/overlap.md).")
      .def("last_excluded", &SyncEngine::last_excluded,
           "Peer ids whose contribution to the last settled round was excluded: as non-finite, "
           "then (quant='sparse') as a malformed encoding every peer refused.")
      .def("global_params", &SyncEngine::global_params, "fragment"_a, "out"_a,
           nb::sig("def global_params(self, fragment: int, out: longhaul.DLPackTensor) -> None"),
           "Copies fragment `fragment`'s global parameters into `out` (float32, exactly the "
           "fragment's size; ValueError otherwise).")
      .def("destroy", &SyncEngine::destroy,
           "Frees the engine now (a round in flight is abandoned). Idempotent.");
}

}  // namespace longhaul::py
