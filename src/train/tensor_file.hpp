// Named float32 tensors exchanged with other programs (the PyTorch parity test): PREFIX.bin holds
// the raw little-endian floats back to back, PREFIX.json the table
//   {"tensors": [{"name": "wte", "shape": [256, 128], "offset": 0}, ...]}
// with offsets in floats. No C++ reader: the consumers are Python scripts.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace longhaul::train {

struct NamedTensor {
  std::string name;
  std::vector<int> shape;
  std::span<const float> data;  // product of shape floats
};

Status write_tensors(const std::string& prefix, const std::vector<NamedTensor>& tensors);

}  // namespace longhaul::train
