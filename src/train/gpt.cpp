#include "train/gpt.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

#include "train/attention.hpp"
#include "train/blas.hpp"
#include "train/embedding.hpp"
#include "train/gelu.hpp"
#include "train/kernels.hpp"
#include "train/layernorm.hpp"
#include "train/linear.hpp"
#include "train/softmax_cross_entropy.hpp"

namespace longhaul::train {

namespace {
void zero(std::vector<float>& v) {
  std::fill(v.begin(), v.end(), 0.0f);
}
}  // namespace

Gpt::Gpt(const GptConfig& config)
    : config_(config),
      params_(parameter_count(config), 0.0f),
      grads_(parameter_count(config), 0.0f) {}

Result<Gpt> Gpt::create(const GptConfig& config) {
  LH_RETURN_IF_ERROR(config.validate());
  if (Result<const Kernels*> kernels = selected_kernels(); !kernels) return kernels.status();
  LH_RETURN_IF_ERROR(blas_init());
  return Gpt(config);
}

void Gpt::ensure_activations(int B, int T) {
  if (B == B_ && T == T_) return;
  B_ = B;
  T_ = T;
  const std::size_t L = static_cast<std::size_t>(config_.layers);
  const std::size_t C = static_cast<std::size_t>(config_.channels);
  const std::size_t V = static_cast<std::size_t>(config_.vocab);
  const std::size_t NH = static_cast<std::size_t>(config_.heads);
  const std::size_t N = static_cast<std::size_t>(B) * static_cast<std::size_t>(T);
  const std::size_t att =
      static_cast<std::size_t>(B) * NH * static_cast<std::size_t>(T) * static_cast<std::size_t>(T);
  Activations& a = acts_;
  a.encoded.assign(N * C, 0.0f);
  a.ln1.assign(L * N * C, 0.0f);
  a.ln1_mean.assign(L * N, 0.0f);
  a.ln1_rstd.assign(L * N, 0.0f);
  a.qkv.assign(L * N * 3 * C, 0.0f);
  a.atty.assign(L * N * C, 0.0f);
  a.att.assign(L * att, 0.0f);
  a.attproj.assign(L * N * C, 0.0f);
  a.residual2.assign(L * N * C, 0.0f);
  a.ln2.assign(L * N * C, 0.0f);
  a.ln2_mean.assign(L * N, 0.0f);
  a.ln2_rstd.assign(L * N, 0.0f);
  a.fch.assign(L * N * 4 * C, 0.0f);
  a.fch_gelu.assign(L * N * 4 * C, 0.0f);
  a.fcproj.assign(L * N * C, 0.0f);
  a.residual3.assign(L * N * C, 0.0f);
  a.lnf.assign(N * C, 0.0f);
  a.lnf_mean.assign(N, 0.0f);
  a.lnf_rstd.assign(N, 0.0f);
  a.logits.assign(N * V, 0.0f);
  a.probs.assign(N * V, 0.0f);
  a.losses.assign(N, 0.0f);
  GradScratch& d = dacts_;
  d.residual.assign(N * C, 0.0f);
  d.ln.assign(N * C, 0.0f);
  d.atty.assign(N * C, 0.0f);
  d.qkv.assign(N * 3 * C, 0.0f);
  d.att.assign(att, 0.0f);
  d.fch.assign(N * 4 * C, 0.0f);
  d.fch_gelu.assign(N * 4 * C, 0.0f);
  d.logits.assign(N * V, 0.0f);
}

Result<float> Gpt::forward(const int* inputs, const int* targets, int B, int T) {
  if (B < 1 || T < 1 || T > config_.context) {
    return invalid_argument("forward: need B >= 1 and 1 <= T <= context (" +
                            std::to_string(config_.context) + "), got B=" + std::to_string(B) +
                            " T=" + std::to_string(T));
  }
  const int N = B * T;
  for (int i = 0; i < N; ++i) {
    if (inputs[i] < 0 || inputs[i] >= config_.vocab ||
        (targets != nullptr && (targets[i] < 0 || targets[i] >= config_.vocab))) {
      return invalid_argument("forward: token out of range at index " + std::to_string(i));
    }
  }
  ensure_activations(B, T);
  inputs_.assign(inputs, inputs + N);
  have_targets_ = targets != nullptr;
  if (have_targets_) targets_.assign(targets, targets + N);

  const int C = config_.channels, V = config_.vocab;
  const std::ptrdiff_t NC = static_cast<std::ptrdiff_t>(N) * C;
  const ParamViews p = param_views();
  Activations& a = acts_;
  Profile* prof = profile_;

  {
    ScopedPhase t(prof, Phase::kEmbedding, false);
    embedding_forward(a.encoded.data(), inputs_.data(), p.wte, p.wpe, B, T, C);
  }
  // Layer 0's first LayerNorm reads the embeddings; every later LayerNorm is fused with the
  // residual add that produces its input (residual_layernorm_forward).
  {
    ScopedPhase t(prof, Phase::kLayerNorm, false);
    layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), a.encoded.data(), p.ln1_w,
                      p.ln1_b, N, C);
  }
  // Each block's output stream (residual3) is the next block's input.
  for (int l = 0; l < config_.layers; ++l)
    layer_forward(l, l == 0 ? a.encoded.data() : a.residual3.data() + (l - 1) * NC, p);
  {
    ScopedPhase t(prof, Phase::kHead, false);
    linear_forward(a.logits.data(), a.lnf.data(), p.wte, nullptr, N, C, V);
  }
  if (!have_targets_) return 0.0f;
  ScopedPhase t(prof, Phase::kLoss, false);
  return softmax_cross_entropy_forward(a.probs.data(), a.losses.data(), a.logits.data(),
                                       targets_.data(), N, V);
}

std::span<const float> Gpt::logits() const {
  return {acts_.logits.data(), static_cast<std::size_t>(B_) * static_cast<std::size_t>(T_) *
                                   static_cast<std::size_t>(config_.vocab)};
}

void Gpt::zero_grad() {
  zero(grads_);
}

Status Gpt::backward() {
  if (!have_targets_) return invalid_argument("backward: the last forward() had no targets");
  const int B = B_, T = T_, N = B * T;
  const int L = config_.layers, C = config_.channels, V = config_.vocab;
  const long NC = static_cast<long>(N) * C;
  const ParamViews p = param_views();
  const ParamViews g = grad_views();
  const Activations& a = acts_;
  GradScratch& d = dacts_;
  Profile* prof = profile_;

  {
    ScopedPhase t(prof, Phase::kLoss, true);
    softmax_cross_entropy_backward(d.logits.data(), a.probs.data(), targets_.data(), N, V);
  }
  {
    ScopedPhase t(prof, Phase::kHead, true);
    linear_backward(d.ln.data(), g.wte, nullptr, d.logits.data(), a.lnf.data(), p.wte, N, C, V);
  }
  const float* last_residual = a.residual3.data() + static_cast<std::ptrdiff_t>(L - 1) * NC;
  {
    ScopedPhase t(prof, Phase::kLayerNorm, true);
    zero(d.residual);
    layernorm_backward(d.residual.data(), g.lnf_w, g.lnf_b, d.ln.data(), last_residual, p.lnf_w,
                       a.lnf_mean.data(), a.lnf_rstd.data(), N, C);
  }
  for (int l = L - 1; l >= 0; --l) layer_backward(l, p, g);
  ScopedPhase t(prof, Phase::kEmbedding, true);
  embedding_backward(g.wte, g.wpe, d.residual.data(), inputs_.data(), B, T, C);
  return Status::ok();
}

void Gpt::layer_forward(int l, const float* residual, const ParamViews& p) {
  const int B = B_, T = T_, N = B * T;
  const int C = config_.channels, NH = config_.heads;
  const std::ptrdiff_t att_size = static_cast<std::ptrdiff_t>(B) * NH * T * T;
  Activations& a = acts_;
  Profile* prof = profile_;
  const std::ptrdiff_t lN = static_cast<std::ptrdiff_t>(l) * N;
  const std::ptrdiff_t lC = static_cast<std::ptrdiff_t>(l) * C;
  float* ln1 = a.ln1.data() + lN * C;
  float* qkv = a.qkv.data() + lN * 3 * C;
  float* atty = a.atty.data() + lN * C;
  float* att = a.att.data() + l * att_size;
  float* attproj = a.attproj.data() + lN * C;
  float* residual2 = a.residual2.data() + lN * C;
  float* ln2 = a.ln2.data() + lN * C;
  float* fch = a.fch.data() + lN * 4 * C;
  float* fch_gelu = a.fch_gelu.data() + lN * 4 * C;
  float* fcproj = a.fcproj.data() + lN * C;
  float* residual3 = a.residual3.data() + lN * C;
  {
    ScopedPhase t(prof, Phase::kQkvLinear, false);
    linear_forward(qkv, ln1, p.qkv_w + lC * 3 * C, p.qkv_b + lC * 3, N, C, 3 * C);
  }
  {
    ScopedPhase t(prof, Phase::kAttention, false);
    attention_forward(atty, att, qkv, B, T, C, NH);
  }
  {
    ScopedPhase t(prof, Phase::kAttProjLinear, false);
    linear_forward(attproj, atty, p.attproj_w + lC * C, p.attproj_b + lC, N, C, C);
  }
  {
    ScopedPhase t(prof, Phase::kLayerNorm, false);
    residual_layernorm_forward(residual2, ln2, a.ln2_mean.data() + lN, a.ln2_rstd.data() + lN,
                               residual, attproj, p.ln2_w + lC, p.ln2_b + lC, N, C);
  }
  {
    ScopedPhase t(prof, Phase::kFcLinear, false);  // GELU fused into the tiles
    linear_gelu_forward(fch, fch_gelu, ln2, p.fc_w + lC * 4 * C, p.fc_b + lC * 4, N, C, 4 * C);
  }
  {
    ScopedPhase t(prof, Phase::kFcProjLinear, false);
    linear_forward(fcproj, fch_gelu, p.fcproj_w + lC * 4 * C, p.fcproj_b + lC, N, 4 * C, C);
  }
  {
    ScopedPhase t(prof, Phase::kLayerNorm, false);
    const bool last = l + 1 == config_.layers;
    const std::ptrdiff_t next = (lN + N) * C;  // the next layer's ln1 rows
    residual_layernorm_forward(residual3, last ? a.lnf.data() : a.ln1.data() + next,
                               last ? a.lnf_mean.data() : a.ln1_mean.data() + lN + N,
                               last ? a.lnf_rstd.data() : a.ln1_rstd.data() + lN + N, residual2,
                               fcproj, last ? p.lnf_w : p.ln1_w + lC + C,
                               last ? p.lnf_b : p.ln1_b + lC + C, N, C);
  }
}

void Gpt::layer_backward(int l, const ParamViews& p, const ParamViews& g) {
  const int B = B_, T = T_, N = B * T;
  const int C = config_.channels, NH = config_.heads;
  const long NC = static_cast<long>(N) * C;
  const std::ptrdiff_t att_size = static_cast<std::ptrdiff_t>(B) * NH * T * T;
  const Activations& a = acts_;
  GradScratch& d = dacts_;
  Profile* prof = profile_;
  const std::ptrdiff_t lN = static_cast<std::ptrdiff_t>(l) * N;
  const std::ptrdiff_t lC = static_cast<std::ptrdiff_t>(l) * C;
  const float* residual =
      l == 0 ? a.encoded.data() : a.residual3.data() + static_cast<std::ptrdiff_t>(l - 1) * NC;
  const float* ln1 = a.ln1.data() + lN * C;
  const float* qkv = a.qkv.data() + lN * 3 * C;
  const float* atty = a.atty.data() + lN * C;
  const float* att = a.att.data() + l * att_size;
  const float* residual2 = a.residual2.data() + lN * C;
  const float* ln2 = a.ln2.data() + lN * C;
  const float* fch = a.fch.data() + lN * 4 * C;
  const float* fch_gelu = a.fch_gelu.data() + lN * 4 * C;
  // residual3 = residual2 + fcproj: both receive d.residual as it stands.
  {
    ScopedPhase t(prof, Phase::kFcProjLinear, true);
    linear_backward(d.fch_gelu.data(), g.fcproj_w + lC * 4 * C, g.fcproj_b + lC, d.residual.data(),
                    fch_gelu, p.fcproj_w + lC * 4 * C, N, 4 * C, C);
  }
  {
    ScopedPhase t(prof, Phase::kGelu, true);
    gelu_backward(d.fch.data(), fch, d.fch_gelu.data(), NC * 4);
  }
  {
    ScopedPhase t(prof, Phase::kFcLinear, true);
    linear_backward(d.ln.data(), g.fc_w + lC * 4 * C, g.fc_b + lC * 4, d.fch.data(), ln2,
                    p.fc_w + lC * 4 * C, N, C, 4 * C);
  }
  {
    ScopedPhase t(prof, Phase::kLayerNorm, true);
    layernorm_backward(d.residual.data(), g.ln2_w + lC, g.ln2_b + lC, d.ln.data(), residual2,
                       p.ln2_w + lC, a.ln2_mean.data() + lN, a.ln2_rstd.data() + lN, N, C);
  }
  // residual2 = residual + attproj
  {
    ScopedPhase t(prof, Phase::kAttProjLinear, true);
    linear_backward(d.atty.data(), g.attproj_w + lC * C, g.attproj_b + lC, d.residual.data(), atty,
                    p.attproj_w + lC * C, N, C, C);
  }
  {
    ScopedPhase t(prof, Phase::kAttention, true);
    attention_backward(d.qkv.data(), d.att.data(), d.atty.data(), qkv, att, B, T, C, NH);
  }
  {
    ScopedPhase t(prof, Phase::kQkvLinear, true);
    linear_backward(d.ln.data(), g.qkv_w + lC * 3 * C, g.qkv_b + lC * 3, d.qkv.data(), ln1,
                    p.qkv_w + lC * 3 * C, N, C, 3 * C);
  }
  {
    ScopedPhase t(prof, Phase::kLayerNorm, true);
    layernorm_backward(d.residual.data(), g.ln1_w + lC, g.ln1_b + lC, d.ln.data(), residual,
                       p.ln1_w + lC, a.ln1_mean.data() + lN, a.ln1_rstd.data() + lN, N, C);
  }
}

}  // namespace longhaul::train
