// The trainer's kernels of one instruction set (common/cpu_isa.hpp), as a table. Internal to
// lh_train: gelu.hpp, layernorm.hpp, linear.hpp, attention.hpp, embedding.hpp and
// softmax_cross_entropy.hpp declare the functions; outside the kernel files their names reach
// kernel_dispatch.cpp, which calls the selected ISA's table.
//
// Unlike the collectives' kernels (src/quant), these need not give the same bits on every ISA:
// each peer trains its own replica, and only what crosses the network must be bit-identical. The
// builds differ by their vector width only (the order of the lane sums in fast_math.hpp is fixed,
// no contraction), and gave the same results in every measurement so far; the matrix products are
// OpenBLAS's, whose kernel set does change them. docs/trainer.md gives the spread measured.
#pragma once

#include "common/cpu_isa.hpp"
#include "common/status.hpp"
#include "train/isa_namespace.hpp"

namespace longhaul::train {

struct Kernels {
  Isa isa;
  void (*gelu_forward)(float* out, const float* inp, long N);
  void (*gelu_forward_serial)(float* out, const float* inp, long N);
  void (*gelu_backward)(float* dinp, const float* inp, const float* dout, long N);
  void (*layernorm_forward)(float* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int N, int C);
  void (*residual_layernorm_forward)(float* residual, float* out, float* mean, float* rstd,
                                     const float* a, const float* b, const float* weight,
                                     const float* bias, int N, int C);
  void (*layernorm_backward)(float* dinp, float* dweight, float* dbias, const float* dout,
                             const float* inp, const float* weight, const float* mean,
                             const float* rstd, int N, int C);
  void (*linear_forward)(float* out, const float* inp, const float* weight, const float* bias,
                         int N, int C, int OC);
  void (*linear_gelu_forward)(float* out, float* out_gelu, const float* inp, const float* weight,
                              const float* bias, int N, int C, int OC);
  void (*linear_backward)(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, int N, int C, int OC);
  void (*attention_forward)(float* out, float* att, const float* qkv, int B, int T, int C, int NH);
  void (*attention_backward)(float* dqkv, float* scratch, const float* dout, const float* qkv,
                             const float* att, int B, int T, int C, int NH);
  void (*embedding_forward)(float* out, const int* tokens, const float* wte, const float* wpe,
                            int B, int T, int C);
  void (*embedding_backward)(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                             int T, int C);
  float (*softmax_cross_entropy_forward)(float* probs, float* losses, const float* logits,
                                         const int* targets, int N, int V);
  void (*softmax_cross_entropy_backward)(float* dlogits, const float* probs, const int* targets,
                                         int N, int V);
};

// This ISA build's table (kernel_table.cpp, compiled once per ISA): constant data, so that no
// code of a build runs before the CPU is known to support it.
inline namespace LH_TRAIN_ISA_NS {
extern const Kernels kKernelTable;
}  // namespace LH_TRAIN_ISA_NS

// The table of `isa` (whether or not this CPU runs it: check cpu_supports() before calling).
const Kernels& kernels_for(Isa isa);

// The table of selected_isa(), or its error (an unknown or unsupported LONGHAUL_FORCE_ISA);
// Gpt::create() returns that error before any kernel runs.
Result<const Kernels*> selected_kernels();

}  // namespace longhaul::train
