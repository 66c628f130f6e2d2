// The GPT's fragments for Streaming DiLoCo (tools/longhaul-train/fragment_layout.hpp): every
// parameter in exactly one fragment, layer l of every per-layer tensor in fragment l mod F, the
// other tensors cut into F row-blocks (block b in fragment b), and theta_g scattered back from the
// fragments lands where it came from.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "fragment_layout.hpp"
#include "train/param_layout.hpp"

namespace longhaul::train::cli {
namespace {

// The fragment of every element of the flat buffer (-1: none), failing on overlaps.
std::vector<int> owners(const FragmentLayout& layout, std::size_t total) {
  std::vector<int> owner(total, -1);
  for (const lh_fragment_piece& p : layout.pieces) {
    EXPECT_EQ(p.range, 0u);
    EXPECT_LE(p.offset + p.count, total);
    for (std::size_t i = p.offset; i < p.offset + p.count && i < total; ++i) {
      EXPECT_EQ(owner[i], -1) << "element " << i << " is in two pieces";
      owner[i] = static_cast<int>(p.fragment);
    }
  }
  return owner;
}

TEST(trainFragmentLayout, LayersGoRoundRobinAndTheOtherTensorsAreCutIntoRowBlocks) {
  const GptConfig config{256, 32, 5, 32, 2};
  const std::uint32_t F = 4;
  const FragmentLayout layout = make_fragment_layout(config, F);
  const std::vector<int> owner = owners(layout, parameter_count(config));
  for (int o : owner) ASSERT_NE(o, -1) << "an element in no fragment";
  for (const TensorSpec& t : parameter_layout(config)) {
    const std::size_t rows = static_cast<std::size_t>(t.shape[0]), row = t.size / rows;
    for (std::size_t r = 0; r < rows; ++r) {
      const int expected = t.per_layer ? static_cast<int>(r % F) : static_cast<int>(r * F / rows);
      for (std::size_t i = 0; i < row; ++i)
        ASSERT_EQ(owner[t.offset + r * row + i], expected) << t.name << " row " << r;
    }
  }
  std::size_t sum = 0;
  for (std::size_t s : layout.fragment_sizes) sum += s;
  EXPECT_EQ(sum, parameter_count(config));
}

TEST(trainFragmentLayout, OneFragmentIsTheWholeBufferInOrder) {
  const GptConfig config{256, 16, 2, 16, 2};
  const FragmentLayout layout = make_fragment_layout(config, 1);
  std::size_t next = 0;
  for (const lh_fragment_piece& p : layout.pieces) {
    EXPECT_EQ(p.fragment, 0u);
    EXPECT_EQ(p.offset, next);
    next += p.count;
  }
  EXPECT_EQ(next, parameter_count(config));
  EXPECT_EQ(layout.fragment_sizes, std::vector<std::size_t>{parameter_count(config)});
}

// What the engine keeps of fragment f is its pieces' elements in piece order; scattering those
// values back rebuilds the buffer.
TEST(trainFragmentLayout, ScatteringEveryFragmentRebuildsTheBuffer) {
  const GptConfig config{256, 16, 3, 16, 2};
  const std::uint32_t F = 4;
  const FragmentLayout layout = make_fragment_layout(config, F);
  std::vector<float> buffer(parameter_count(config));
  std::iota(buffer.begin(), buffer.end(), 1.0f);
  std::vector<float> rebuilt(buffer.size(), 0.0f);
  for (std::uint32_t f = 0; f < F; ++f) {
    std::vector<float> fragment;
    for (const lh_fragment_piece& p : layout.pieces)
      if (p.fragment == f)
        fragment.insert(fragment.end(), buffer.begin() + static_cast<std::ptrdiff_t>(p.offset),
                        buffer.begin() + static_cast<std::ptrdiff_t>(p.offset + p.count));
    ASSERT_EQ(fragment.size(), layout.fragment_sizes[f]);
    scatter_fragment(layout, f, fragment, rebuilt);
  }
  EXPECT_EQ(rebuilt, buffer);
}

}  // namespace
}  // namespace longhaul::train::cli
