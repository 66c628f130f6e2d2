// The model's parameters live in one flat float buffer (and so do their gradients and the AdamW
// moments), because the outer loops all-reduce and sync them as a few large tensors. This file
// names the pieces: a table of (name, shape, offset) and a struct of pointers into any buffer
// laid out that way.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "train/config.hpp"

namespace longhaul::train {

struct TensorSpec {
  std::string name;        // e.g. "qkv_w"; per-layer tensors are stacked along a leading L
  std::vector<int> shape;  // row-major
  std::size_t offset = 0;  // in floats from the start of the flat buffer
  std::size_t size = 0;    // product of shape
  bool decay = false;      // AdamW weight decay applies (matrices only, not biases or norms)
  bool per_layer = false;  // stacked along a leading L: layer l is the l-th of L equal slices
};

// The order of the tensors in the flat buffer (llm.c's order: per-kind, layers stacked).
std::vector<TensorSpec> parameter_layout(const GptConfig& config);
std::size_t parameter_count(const GptConfig& config);

// Views into one flat buffer laid out by parameter_layout(). Shapes use V vocab, T context,
// L layers, C channels.
struct ParamViews {
  float* wte;        // (V, C)   token embedding, also the output head
  float* wpe;        // (T, C)   position embedding
  float* ln1_w;      // (L, C)
  float* ln1_b;      // (L, C)
  float* qkv_w;      // (L, 3C, C)
  float* qkv_b;      // (L, 3C)
  float* attproj_w;  // (L, C, C)
  float* attproj_b;  // (L, C)
  float* ln2_w;      // (L, C)
  float* ln2_b;      // (L, C)
  float* fc_w;       // (L, 4C, C)
  float* fc_b;       // (L, 4C)
  float* fcproj_w;   // (L, C, 4C)
  float* fcproj_b;   // (L, C)
  float* lnf_w;      // (C)
  float* lnf_b;      // (C)
};

ParamViews make_param_views(const GptConfig& config, float* base);

}  // namespace longhaul::train
