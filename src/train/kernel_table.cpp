// The table of this ISA's build of the trainer's kernels (kernels.hpp); compiled once per ISA.
#include "train/attention.hpp"
#include "train/embedding.hpp"
#include "train/gelu.hpp"
#include "train/kernels.hpp"
#include "train/layernorm.hpp"
#include "train/linear.hpp"
#include "train/softmax_cross_entropy.hpp"

namespace longhaul::train {
inline namespace LH_TRAIN_ISA_NS {

constinit const Kernels kKernelTable = {
    .isa = Isa::LH_TRAIN_ISA_ENUM,
    .gelu_forward = gelu_forward,
    .gelu_forward_serial = gelu_forward_serial,
    .gelu_backward = gelu_backward,
    .layernorm_forward = layernorm_forward,
    .residual_layernorm_forward = residual_layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .linear_forward = linear_forward,
    .linear_gelu_forward = linear_gelu_forward,
    .linear_backward = linear_backward,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .softmax_cross_entropy_forward = softmax_cross_entropy_forward,
    .softmax_cross_entropy_backward = softmax_cross_entropy_backward,
};

}  // namespace LH_TRAIN_ISA_NS
}  // namespace longhaul::train
