#include "train/dataset.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "train/rng.hpp"

namespace longhaul::train {

namespace fs = std::filesystem;

namespace {

bool in_installed_packages(const fs::path& relative) {
  for (const fs::path& part : relative) {
    if (part == "site-packages" || part == "dist-packages") return true;
  }
  return false;
}

Status list_python_files(const fs::path& dir, std::vector<std::string>* out) {
  std::error_code ec;
  std::vector<std::string> found;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) return io_error("cannot list " + dir.string() + ": " + ec.message());
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return io_error("cannot list " + dir.string() + ": " + ec.message());
    const fs::directory_entry& e = *it;
    if (!e.is_regular_file(ec) || e.path().extension() != ".py") continue;
    if (in_installed_packages(fs::relative(e.path(), dir, ec))) continue;
    found.push_back(e.path().string());
  }
  // Directory iteration order is the filesystem's; sorting makes the corpus the same everywhere.
  std::sort(found.begin(), found.end());
  out->insert(out->end(), found.begin(), found.end());
  return Status::ok();
}

Status append_file(const std::string& path, std::vector<std::uint8_t>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open " + path);
  out->insert(out->end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return io_error("cannot read " + path);
  return Status::ok();
}

void fill_window(const std::vector<std::uint8_t>& split, std::size_t offset, int T, int* inputs,
                 int* targets) {
  for (int t = 0; t < T; ++t) {
    inputs[t] = split[offset + static_cast<std::size_t>(t)];
    targets[t] = split[offset + static_cast<std::size_t>(t) + 1];
  }
}

}  // namespace

Result<Corpus> build_corpus(const std::vector<std::string>& paths) {
  if (paths.empty()) return invalid_argument("no training data given");
  Corpus corpus;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      LH_RETURN_IF_ERROR(list_python_files(p, &corpus.files));
    } else if (fs::is_regular_file(p, ec)) {
      corpus.files.push_back(p);
    } else {
      return io_error("no such file or directory: " + p);
    }
  }
  if (corpus.files.empty()) return invalid_argument("no *.py files under the given directories");
  for (std::size_t i = 0; i < corpus.files.size(); ++i) {
    const bool held_out = i % 10 == 9;
    LH_RETURN_IF_ERROR(append_file(corpus.files[i], held_out ? &corpus.val : &corpus.train));
    if (held_out) ++corpus.val_files;
  }
  if (corpus.val.empty()) {
    const std::size_t cut = corpus.train.size() - corpus.train.size() / 10;
    corpus.val.assign(corpus.train.begin() + static_cast<std::ptrdiff_t>(cut), corpus.train.end());
    corpus.train.resize(cut);
  }
  return corpus;
}

double unigram_cross_entropy(const std::vector<std::uint8_t>& reference,
                             const std::vector<std::uint8_t>& text) {
  std::array<double, 256> counts{};
  for (std::uint8_t b : reference) counts[b] += 1.0;
  // Add-one smoothing so a byte absent from the reference costs a finite amount.
  const double total = static_cast<double>(reference.size()) + 256.0;
  std::array<double, 256> seen{};
  for (std::uint8_t b : text) seen[b] += 1.0;
  double nats = 0.0;
  for (int b = 0; b < 256; ++b) {
    if (seen[b] > 0.0) nats -= seen[b] * std::log((counts[b] + 1.0) / total);
  }
  return text.empty() ? 0.0 : nats / static_cast<double>(text.size());
}

Result<Batch> train_batch(const std::vector<std::uint8_t>& split, int B, int T, std::uint64_t seed,
                          std::uint64_t index) {
  if (B < 1 || T < 1) return invalid_argument("batch needs B >= 1 and T >= 1");
  if (split.size() < static_cast<std::size_t>(T) + 1) {
    return invalid_argument("training split shorter than one window of context + 1 bytes");
  }
  Batch batch{B, T, std::vector<int>(static_cast<std::size_t>(B) * T),
              std::vector<int>(static_cast<std::size_t>(B) * T)};
  Rng rng(mix_seed(seed, index));
  const std::uint64_t windows = split.size() - static_cast<std::size_t>(T);
  for (int b = 0; b < B; ++b) {
    const std::size_t offset = rng.below(windows);
    const std::size_t row = static_cast<std::size_t>(b) * T;
    fill_window(split, offset, T, batch.inputs.data() + row, batch.targets.data() + row);
  }
  return batch;
}

Result<Batch> val_batch(const std::vector<std::uint8_t>& split, int B, int T, int index,
                        int count) {
  if (B < 1 || T < 1 || count < 1 || index < 0 || index >= count) {
    return invalid_argument("val_batch: bad B, T, index or count");
  }
  if (split.size() < static_cast<std::size_t>(T) + 1) {
    return invalid_argument("validation split shorter than one window of context + 1 bytes");
  }
  Batch batch{B, T, std::vector<int>(static_cast<std::size_t>(B) * T),
              std::vector<int>(static_cast<std::size_t>(B) * T)};
  const std::size_t last = split.size() - static_cast<std::size_t>(T) - 1;
  const std::size_t windows = static_cast<std::size_t>(B) * static_cast<std::size_t>(count);
  for (int b = 0; b < B; ++b) {
    const std::size_t w = static_cast<std::size_t>(index) * B + static_cast<std::size_t>(b);
    const std::size_t offset = windows > 1 ? w * last / (windows - 1) : 0;
    const std::size_t row = static_cast<std::size_t>(b) * T;
    fill_window(split, offset, T, batch.inputs.data() + row, batch.targets.data() + row);
  }
  return batch;
}

}  // namespace longhaul::train
