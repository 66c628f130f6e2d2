// The GPT's parameters as fragments of the sync engine (docs/training.md, "The GPT's fragments"):
// the flat parameter buffer is one lh_param_range, cut into lh_fragment_pieces so that layer l of
// every per-layer tensor goes to fragment l mod F and each of the other tensors (wte, wpe, lnf)
// is cut into F blocks of rows, block b going to fragment b. With F = 1 fragment 0 is the whole
// buffer in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "longhaul/longhaul.h"
#include "train/config.hpp"

namespace longhaul::train::cli {

struct FragmentLayout {
  // Over range 0 (the flat buffer), in ascending offset order; a fragment's elements are its
  // pieces' elements in this order (the order the engine keeps them in).
  std::vector<lh_fragment_piece> pieces;
  std::vector<std::size_t> fragment_sizes;  // elements per fragment
};

// The layout of `fragments` fragments over a model of `config`. Fragments that would get no
// element (more fragments than layers and embedding rows) are the caller's error: the engine
// refuses them when it starts.
FragmentLayout make_fragment_layout(const GptConfig& config, std::uint32_t fragments);

// Writes fragment f's values (fragment_sizes[f] floats, in the fragment's order) to their places
// in `flat` (the parameter buffer's layout).
void scatter_fragment(const FragmentLayout& layout, std::uint32_t f, std::span<const float> values,
                      std::span<float> flat);

}  // namespace longhaul::train::cli
