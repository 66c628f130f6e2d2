#include "train/profile.hpp"

namespace longhaul::train {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::kEmbedding:
      return "embedding";
    case Phase::kLayerNorm:
      return "layernorm";
    case Phase::kQkvLinear:
      return "qkv_linear";
    case Phase::kAttention:
      return "attention";
    case Phase::kAttProjLinear:
      return "attproj_linear";
    case Phase::kFcLinear:
      return "fc_linear";
    case Phase::kGelu:
      return "gelu";
    case Phase::kFcProjLinear:
      return "fcproj_linear";
    case Phase::kHead:
      return "head";
    case Phase::kLoss:
      return "softmax_cross_entropy";
    case Phase::kClip:
      return "grad_clip";
    case Phase::kOptimizer:
      return "adamw";
    case Phase::kCount:
      break;
  }
  return "?";
}

double Profile::total() const {
  double sum = 0.0;
  for (const auto& p : seconds_) sum += p[0] + p[1];
  return sum;
}

}  // namespace longhaul::train
