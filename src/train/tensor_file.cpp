#include "train/tensor_file.hpp"

#include <bit>
#include <fstream>

namespace longhaul::train {

static_assert(std::endian::native == std::endian::little, "tensor files are little-endian");

Status write_tensors(const std::string& prefix, const std::vector<NamedTensor>& tensors) {
  std::ofstream bin(prefix + ".bin", std::ios::binary | std::ios::trunc);
  if (!bin) return io_error("cannot create " + prefix + ".bin");
  std::string json = "{\"tensors\": [";
  std::size_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    std::size_t size = 1;
    for (int d : t.shape) size *= static_cast<std::size_t>(d);
    if (size != t.data.size())
      return invalid_argument("tensor " + t.name + ": shape/size mismatch");
    bin.write(reinterpret_cast<const char*>(t.data.data()),
              static_cast<std::streamsize>(t.data.size_bytes()));
    json += i == 0 ? "\n" : ",\n";
    json += "  {\"name\": \"" + t.name + "\", \"shape\": [";
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      json += (d == 0 ? "" : ", ") + std::to_string(t.shape[d]);
    }
    json += "], \"offset\": " + std::to_string(offset) + "}";
    offset += size;
  }
  json += "\n]}\n";
  bin.flush();
  if (!bin) return io_error("cannot write " + prefix + ".bin");
  std::ofstream meta(prefix + ".json", std::ios::trunc);
  meta << json;
  meta.flush();
  if (!meta) return io_error("cannot write " + prefix + ".json");
  return Status::ok();
}

}  // namespace longhaul::train
