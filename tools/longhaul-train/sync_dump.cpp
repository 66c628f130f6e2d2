#include "sync_dump.hpp"

#include <bit>
#include <filesystem>
#include <fstream>

namespace longhaul::train::cli {

static_assert(std::endian::native == std::endian::little, "the dump files are little-endian f32");

Status SyncDump::write(const std::string& name, std::span<const float> values) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return io_error("cannot create " + dir_ + ": " + ec.message());
  const std::string path = dir_ + "/" + name + ".bin";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size_bytes()));
  if (!out) return io_error("cannot write " + path);
  return Status::ok();
}

}  // namespace longhaul::train::cli
