#include "train/param_layout.hpp"

namespace longhaul::train {

Status GptConfig::validate() const {
  if (vocab < 1 || vocab > 256) return invalid_argument("vocab must be in 1..256 (byte-level)");
  if (context < 1) return invalid_argument("context must be positive");
  if (layers < 1) return invalid_argument("layers must be positive");
  if (channels < 1 || heads < 1) return invalid_argument("channels and heads must be positive");
  if (channels % heads != 0) return invalid_argument("channels must be a multiple of heads");
  return Status::ok();
}

std::vector<TensorSpec> parameter_layout(const GptConfig& c) {
  const int V = c.vocab, T = c.context, L = c.layers, C = c.channels;
  std::vector<TensorSpec> specs = {
      {"wte", {V, C}, 0, 0, true, false},
      {"wpe", {T, C}, 0, 0, true, false},
      {"ln1_w", {L, C}, 0, 0, false, true},
      {"ln1_b", {L, C}, 0, 0, false, true},
      {"qkv_w", {L, 3 * C, C}, 0, 0, true, true},
      {"qkv_b", {L, 3 * C}, 0, 0, false, true},
      {"attproj_w", {L, C, C}, 0, 0, true, true},
      {"attproj_b", {L, C}, 0, 0, false, true},
      {"ln2_w", {L, C}, 0, 0, false, true},
      {"ln2_b", {L, C}, 0, 0, false, true},
      {"fc_w", {L, 4 * C, C}, 0, 0, true, true},
      {"fc_b", {L, 4 * C}, 0, 0, false, true},
      {"fcproj_w", {L, C, 4 * C}, 0, 0, true, true},
      {"fcproj_b", {L, C}, 0, 0, false, true},
      {"lnf_w", {C}, 0, 0, false, false},
      {"lnf_b", {C}, 0, 0, false, false},
  };
  std::size_t offset = 0;
  for (TensorSpec& s : specs) {
    s.size = 1;
    for (int d : s.shape) s.size *= static_cast<std::size_t>(d);
    s.offset = offset;
    offset += s.size;
  }
  return specs;
}

std::size_t parameter_count(const GptConfig& config) {
  const std::vector<TensorSpec> specs = parameter_layout(config);
  return specs.back().offset + specs.back().size;
}

ParamViews make_param_views(const GptConfig& config, float* base) {
  const std::vector<TensorSpec> s = parameter_layout(config);
  ParamViews v;
  float** slots[] = {&v.wte,       &v.wpe,       &v.ln1_w, &v.ln1_b, &v.qkv_w, &v.qkv_b,
                     &v.attproj_w, &v.attproj_b, &v.ln2_w, &v.ln2_b, &v.fc_w,  &v.fc_b,
                     &v.fcproj_w,  &v.fcproj_b,  &v.lnf_w, &v.lnf_b};
  static_assert(sizeof(slots) / sizeof(slots[0]) == 16);
  for (std::size_t i = 0; i < s.size(); ++i) *slots[i] = base + s[i].offset;
  return v;
}

}  // namespace longhaul::train
