// The byte-level GPT: embeddings, L pre-LayerNorm blocks (causal self-attention, GELU MLP), a
// final LayerNorm and a head tied to the token embedding. Parameters and gradients are flat
// buffers (see param_layout.hpp); activations are kept from forward() for backward().
//
// Not thread-safe: one model per training thread (the kernels inside use all threads).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.hpp"
#include "train/config.hpp"
#include "train/param_layout.hpp"
#include "train/profile.hpp"

namespace longhaul::train {

class Gpt {
 public:
  // Parameters are zero until init_parameters() or a copy into params(); gradients zero.
  static Result<Gpt> create(const GptConfig& config);

  const GptConfig& config() const { return config_; }
  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }
  std::span<float> grads() { return grads_; }
  std::span<const float> grads() const { return grads_; }
  ParamViews param_views() { return make_param_views(config_, params_.data()); }
  ParamViews grad_views() { return make_param_views(config_, grads_.data()); }

  // inputs, targets: (B, T) byte values, 1 <= T <= context. Returns the mean cross-entropy
  // (nats) when targets is not null, else 0 and only the logits are computed.
  Result<float> forward(const int* inputs, const int* targets, int B, int T);
  // Logits of the last forward(): (B, T, V).
  std::span<const float> logits() const;

  void zero_grad();
  // Accumulates into grads() the gradient of the mean loss of the last forward() (which must
  // have had targets).
  Status backward();

  // Attach a Profile to time every kernel call (nullptr detaches).
  void set_profile(Profile* profile) { profile_ = profile; }
  Profile* profile() const { return profile_; }

 private:
  explicit Gpt(const GptConfig& config);
  void ensure_activations(int B, int T);
  // One transformer block of forward() for the (B_, T_) of the last forward: `residual` is the
  // block's input stream (the embeddings for layer 0); the block's output LayerNorm (the next
  // layer's ln1, or lnf after the last) is fused into it.
  void layer_forward(int l, const float* residual, const ParamViews& p);
  // One transformer block of backward(): takes d.residual at the block's output and leaves it at
  // its input, accumulating the block's parameter gradients into `g`.
  void layer_backward(int l, const ParamViews& p, const ParamViews& g);

  GptConfig config_;
  std::vector<float> params_, grads_;
  Profile* profile_ = nullptr;

  // Activations for the (B, T) of the last forward(); per-layer tensors stacked along L.
  int B_ = 0, T_ = 0;
  bool have_targets_ = false;
  std::vector<int> inputs_, targets_;
  struct Activations {
    std::vector<float> encoded;                  // (B, T, C)
    std::vector<float> ln1, ln1_mean, ln1_rstd;  // (L, B, T, C), (L, B, T), (L, B, T)
    std::vector<float> qkv;                      // (L, B, T, 3C)
    std::vector<float> atty;                     // (L, B, T, C)
    std::vector<float> att;                      // (L, B, NH, T, T) probabilities
    std::vector<float> attproj;                  // (L, B, T, C)
    std::vector<float> residual2;                // (L, B, T, C)
    std::vector<float> ln2, ln2_mean, ln2_rstd;
    std::vector<float> fch, fch_gelu;            // (L, B, T, 4C)
    std::vector<float> fcproj;                   // (L, B, T, C)
    std::vector<float> residual3;                // (L, B, T, C)
    std::vector<float> lnf, lnf_mean, lnf_rstd;  // (B, T, C), (B, T), (B, T)
    std::vector<float> logits, probs;            // (B, T, V)
    std::vector<float> losses;                   // (B, T)
  } acts_;
  // Gradient scratch for backward(), reused by every layer.
  struct GradScratch {
    std::vector<float> residual;       // (B, T, C): the residual stream's gradient
    std::vector<float> ln;             // (B, T, C)
    std::vector<float> atty;           // (B, T, C)
    std::vector<float> qkv;            // (B, T, 3C)
    std::vector<float> att;            // (B, NH, T, T)
    std::vector<float> fch, fch_gelu;  // (B, T, 4C)
    std::vector<float> logits;         // (B, T, V)
  } dacts_;
};

}  // namespace longhaul::train
