#include "sync/options.hpp"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "sync/schedule.hpp"

namespace longhaul::sync {
namespace {

bool finite_positive(float x) {
  return std::isfinite(x) && x > 0.0f;
}

// The bits of a float: hyperparameters enter the tag exactly.
uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

Status validate_hyperparameters(const EngineOptions& o) {
  if (!std::isfinite(o.mix) || o.mix < 0.0f || o.mix >= 1.0f)
    return invalid_argument(fmt::format("mix (alpha) = {} must be in [0, 1)", o.mix));
  if (!finite_positive(o.nesterov.lr) || !std::isfinite(o.nesterov.momentum) ||
      o.nesterov.momentum < 0.0f || o.nesterov.momentum >= 1.0f)
    return invalid_argument("the outer learning rate must be positive and the momentum in [0, 1)");
  if (o.method == Method::kCo2 &&
      (!finite_positive(o.co2.lr) || !std::isfinite(o.co2.momentum) || o.co2.momentum < 0.0f ||
       o.co2.momentum >= 1.0f || !std::isfinite(o.co2.gap_penalty) || o.co2.gap_penalty < 1.0f ||
       !std::isfinite(o.co2.clip) || o.co2.clip < 0.0f))
    return invalid_argument(
        "CO2 needs a positive outer lr, a momentum in [0, 1), a gap penalty >= 1 and a clip >= 0");
  return Status::ok();
}

// Only an adaptive configuration adds to the tag: a fixed τ's tag (and its checkpoints) stay.
std::string adaptive_tag(const EngineOptions& o) {
  if (!o.adaptive_delay) return "";
  return fmt::format(".adaptive={},{:08x}", o.max_staleness_steps, bits(o.overlap_margin));
}

Status validate_overlap(const EngineOptions& o) {
  if (!o.adaptive_delay) return Status::ok();
  if (o.method != Method::kDiLoCo)
    return Status(
        LH_ERR_UNSUPPORTED,
        fmt::format(
            "{} already overlaps a whole round: the adaptive delay sizes (Streaming) DiLoCo's tau",
            method_name(o.method)));
  if (o.max_staleness_steps == 0)
    return invalid_argument("max_staleness_steps must be at least 1 with the adaptive delay");
  if (o.delay > o.max_staleness_steps)
    return invalid_argument(fmt::format("the first tau = {} exceeds max_staleness_steps = {}",
                                        o.delay, o.max_staleness_steps));
  if (!std::isfinite(o.overlap_margin) || o.overlap_margin < 0.0f)
    return invalid_argument(
        fmt::format("the overlap margin = {} must be finite and not negative", o.overlap_margin));
  return Status::ok();
}

// The sparse codec: (Streaming) DiLoCo only, instead of a dense codec, with the codec's parameters.
Status validate_sparse(const EngineOptions& o) {
  if (!o.sparse.enabled) return Status::ok();
  if (o.method != Method::kDiLoCo)
    return Status(LH_ERR_UNSUPPORTED,
                  fmt::format("the sparse codec runs with DiLoCo and Streaming DiLoCo, not {}: its "
                              "error feedback assumes each round's pseudo-gradient is formed fresh",
                              method_name(o.method)));
  if (o.codec != quant::Codec::kNone)
    return invalid_argument(
        fmt::format("the sparse codec replaces the all-reduce's codec ({}): "
                    "set one or the other",
                    quant::codec_name(o.codec)));
  return quant::sparse::check_params(sparse_params(o.sparse));
}

// Only the sparse codec adds to the tag: a dense configuration's tag (and its checkpoints) stay.
std::string sparse_tag(const EngineOptions& o) {
  if (!o.sparse.enabled) return "";
  return fmt::format(".sparse={},{}", o.sparse.topk_per_chunk, o.sparse.chunk);
}

}  // namespace

quant::sparse::Params sparse_params(const SparseOptions& o) {
  quant::sparse::Params p;
  p.chunk = o.chunk;
  p.topk = o.topk_per_chunk;
  return p;
}

const char* method_name(Method m) {
  switch (m) {
    case Method::kDiLoCo:
      return "diloco";
    case Method::kCo2:
      return "co2";
    case Method::kEager:
      return "eager";
  }
  return "?";
}

Status validate(const EngineOptions& o) {
  if (o.method != Method::kDiLoCo && o.method != Method::kCo2 && o.method != Method::kEager)
    return invalid_argument(fmt::format("unknown outer method {}", static_cast<int>(o.method)));
  if (auto s = FragmentSchedule::make(o.sync_every, o.fragments, o.delay); !s) return s.status();
  if (o.method != Method::kDiLoCo) {
    if (o.delay != 0)
      return invalid_argument(fmt::format("{} applies each round one round later; tau must be 0",
                                          method_name(o.method)));
    if (o.fragments != 1)
      return invalid_argument(
          fmt::format("{} syncs the whole model: fragments must be 1", method_name(o.method)));
  }
  LH_RETURN_IF_ERROR(validate_overlap(o));
  if (o.on_loss != LossPolicy::kRetry && o.on_loss != LossPolicy::kDrop)
    return invalid_argument("unknown loss policy");
  if (o.max_attempts == 0) return invalid_argument("max_attempts must be at least 1");
  if (o.deadline.count() < 0) return invalid_argument("the round deadline must not be negative");
  if (o.adaptive_deadline && o.deadline.count() == 0)
    return invalid_argument(
        "the adaptive deadline needs a deadline > 0: its cap, and the first rounds' deadline");
  if (auto n = quant::encoded_size(1, o.codec, o.block); !n) return n.status();
  LH_RETURN_IF_ERROR(validate_sparse(o));
  return validate_hyperparameters(o);
}

std::string config_tag(const EngineOptions& o, const Layout& layout) {
  std::string sizes;
  for (size_t f = 0; f < layout.fragments(); ++f)
    sizes += fmt::format("{}{}", f ? "," : "", layout.fragment_size(f));
  return fmt::format(
      "{}.H={}.F={}.tau={}.mix={:08x}.lr={:08x}.mu={:08x}.co2={:08x},{:08x},{:08x},{:08x}."
      "codec={}.block={}.sizes={}{}{}",
      method_name(o.method), o.sync_every, o.fragments, o.delay, bits(o.mix), bits(o.nesterov.lr),
      bits(o.nesterov.momentum), bits(o.co2.lr), bits(o.co2.momentum), bits(o.co2.gap_penalty),
      bits(o.co2.clip), quant::codec_name(o.codec), o.block, sizes, adaptive_tag(o), sparse_tag(o));
}

}  // namespace longhaul::sync
