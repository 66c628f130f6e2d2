#include "train/tensor_file.hpp"

#include <bit>
#include <fstream>

#include <nlohmann/json.hpp>

namespace longhaul::train {

static_assert(std::endian::native == std::endian::little, "tensor files are little-endian");

Status write_tensors(const std::string& prefix, const std::vector<NamedTensor>& tensors) {
  std::ofstream bin(prefix + ".bin", std::ios::binary | std::ios::trunc);
  if (!bin) return io_error("cannot create " + prefix + ".bin");
  nlohmann::ordered_json table = nlohmann::ordered_json::array();
  std::size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    std::size_t size = 1;
    for (int d : t.shape) size *= static_cast<std::size_t>(d);
    if (size != t.data.size())
      return invalid_argument("tensor " + t.name + ": shape/size mismatch");
    bin.write(reinterpret_cast<const char*>(t.data.data()),
              static_cast<std::streamsize>(t.data.size_bytes()));
    table.push_back({{"name", t.name}, {"shape", t.shape}, {"offset", offset}});
    offset += size;
  }
  bin.flush();
  if (!bin) return io_error("cannot write " + prefix + ".bin");
  std::ofstream meta(prefix + ".json", std::ios::trunc);
  meta << nlohmann::ordered_json{{"tensors", table}}.dump(1) << "\n";
  meta.flush();
  if (!meta) return io_error("cannot write " + prefix + ".json");
  return Status::ok();
}

}  // namespace longhaul::train
