#include "fragment_layout.hpp"

#include <algorithm>

#include "train/param_layout.hpp"

namespace longhaul::train::cli {

FragmentLayout make_fragment_layout(const GptConfig& config, std::uint32_t fragments) {
  FragmentLayout out;
  out.fragment_sizes.assign(fragments, 0);
  const auto add = [&](std::uint32_t fragment, std::size_t offset, std::size_t count) {
    if (count == 0) return;
    out.pieces.push_back({fragment, 0, offset, count});
    out.fragment_sizes[fragment] += count;
  };
  for (const TensorSpec& t : parameter_layout(config)) {
    // Layers go round-robin, as Streaming DiLoCo assigns them; the rest is cut into F blocks of
    // rows so that every fragment carries a share of the embeddings (the largest non-layer
    // tensors), instead of one fragment carrying all of them.
    const std::size_t rows = static_cast<std::size_t>(t.shape[0]);
    const std::size_t row_size = t.size / rows;
    if (t.per_layer) {
      for (std::size_t l = 0; l < rows; ++l)
        add(static_cast<std::uint32_t>(l % fragments), t.offset + l * row_size, row_size);
      continue;
    }
    for (std::uint32_t b = 0; b < fragments; ++b) {
      const std::size_t begin = b * rows / fragments, end = (b + 1) * rows / fragments;
      add(b, t.offset + begin * row_size, (end - begin) * row_size);
    }
  }
  return out;
}

void scatter_fragment(const FragmentLayout& layout, std::uint32_t f, std::span<const float> values,
                      std::span<float> flat) {
  std::size_t position = 0;
  for (const lh_fragment_piece& p : layout.pieces) {
    if (p.fragment != f) continue;
    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(position), p.count,
                flat.begin() + static_cast<std::ptrdiff_t>(p.offset));
    position += p.count;
  }
}

}  // namespace longhaul::train::cli
