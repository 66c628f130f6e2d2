// The kernels' names as every file outside the kernel builds sees them (namespace `dispatched`,
// isa_namespace.hpp): each calls the selected ISA's build (kernels.hpp).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "train/attention.hpp"
#include "train/embedding.hpp"
#include "train/gelu.hpp"
#include "train/kernels.hpp"
#include "train/layernorm.hpp"
#include "train/linear.hpp"
#include "train/softmax_cross_entropy.hpp"

namespace longhaul::train {

namespace isa_scalar {
extern const Kernels kKernelTable;
}
namespace isa_avx2 {
extern const Kernels kKernelTable;
}
namespace isa_avx512 {
extern const Kernels kKernelTable;
}

const Kernels& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return isa_avx512::kKernelTable;
    case Isa::kAvx2:
      return isa_avx2::kKernelTable;
    case Isa::kScalar:
      break;
  }
  return isa_scalar::kKernelTable;
}

Result<const Kernels*> selected_kernels() {
  Result<Isa> isa = selected_isa();
  if (!isa) return isa.status();
  return &kernels_for(*isa);
}

namespace {

// A kernel called with no usable ISA selected: Gpt::create() reports this as a Status, so only a
// caller that skipped it gets here.
const Kernels& active() {
  Result<const Kernels*> k = selected_kernels();
  if (!k) {
    std::fprintf(stderr, "longhaul: trainer kernel called without a usable ISA: %s\n",
                 k.status().to_string().c_str());
    std::abort();
  }
  return **k;
}

}  // namespace

inline namespace LH_TRAIN_ISA_NS {

void gelu_forward(float* out, const float* inp, long N) {
  active().gelu_forward(out, inp, N);
}
void gelu_forward_serial(float* out, const float* inp, long N) {
  active().gelu_forward_serial(out, inp, N);
}
void gelu_backward(float* dinp, const float* inp, const float* dout, long N) {
  active().gelu_backward(dinp, inp, dout, N);
}
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C) {
  active().layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}
void residual_layernorm_forward(float* residual, float* out, float* mean, float* rstd,
                                const float* a, const float* b, const float* weight,
                                const float* bias, int N, int C) {
  active().residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        int N, int C) {
  active().layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
  active().linear_forward(out, inp, weight, bias, N, C, OC);
}
void linear_gelu_forward(float* out, float* out_gelu, const float* inp, const float* weight,
                         const float* bias, int N, int C, int OC) {
  active().linear_gelu_forward(out, out_gelu, inp, weight, bias, N, C, OC);
}
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int N, int C, int OC) {
  active().linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  active().attention_forward(out, att, qkv, B, T, C, NH);
}
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  active().attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
}
void embedding_forward(float* out, const int* tokens, const float* wte, const float* wpe, int B,
                       int T, int C) {
  active().embedding_forward(out, tokens, wte, wpe, B, T, C);
}
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int* tokens, int B,
                        int T, int C) {
  active().embedding_backward(dwte, dwpe, dout, tokens, B, T, C);
}
float softmax_cross_entropy_forward(float* probs, float* losses, const float* logits,
                                    const int* targets, int N, int V) {
  return active().softmax_cross_entropy_forward(probs, losses, logits, targets, N, V);
}
void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int* targets, int N,
                                    int V) {
  active().softmax_cross_entropy_backward(dlogits, probs, targets, N, V);
}

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
