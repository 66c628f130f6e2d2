// Replays a libFuzzer corpus through fuzz/wire_fuzz.cpp without libFuzzer, so the normal build
// (gcc, no sanitizer needed) re-checks every checked-in input on each test run.
//
//   wire_fuzz_replay <dir-or-file>...
//
// Fails when an argument holds no input at all, so a moved corpus cannot pass vacuously; a failed
// check inside the target traps (and names the file, printed first).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool replay_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "wire_fuzz_replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), bytes.size());
  std::vector<uint8_t> data(bytes.begin(), bytes.end());  // exact size, so ASan sees overreads
  LLVMFuzzerTestOneInput(data.data(), data.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir-or-file>...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg = argv[i];
    std::error_code ec;
    size_t files = 0;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> paths;
      for (const auto& e : std::filesystem::directory_iterator(arg, ec))
        if (e.is_regular_file()) paths.push_back(e.path());
      for (const auto& p : paths) {
        if (!replay_file(p)) return 1;
        ++files;
      }
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      if (!replay_file(arg)) return 1;
      files = 1;
    }
    if (files == 0) {
      std::fprintf(stderr, "wire_fuzz_replay: no inputs in %s\n", arg.c_str());
      return 1;
    }
    std::fprintf(stderr, "wire_fuzz_replay: %zu inputs from %s passed\n", files, arg.c_str());
  }
  return 0;
}
