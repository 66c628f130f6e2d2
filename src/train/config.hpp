// Sizes of the byte-level GPT. Plain struct with documented defaults; validate() says what is
// wrong with a hand-made one.
#pragma once

#include <cstddef>

#include "common/status.hpp"

namespace longhaul::train {

struct GptConfig {
  int vocab = 256;     // bytes; the head is tied to the token embedding (V, C)
  int context = 128;   // T: the longest sequence the position embedding covers
  int layers = 5;      // L: transformer blocks
  int channels = 128;  // C: model width
  int heads = 4;       // NH: attention heads; C must be a multiple of NH

  int head_size() const { return channels / heads; }
  Status validate() const;
};

inline bool operator==(const GptConfig& a, const GptConfig& b) {
  return a.vocab == b.vocab && a.context == b.context && a.layers == b.layers &&
         a.channels == b.channels && a.heads == b.heads;
}

}  // namespace longhaul::train
