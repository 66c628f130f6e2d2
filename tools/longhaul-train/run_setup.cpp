#include "run_setup.hpp"

#include <cstdio>
#include <filesystem>

#include "train/checkpoint.hpp"
#include "train/param_layout.hpp"
#include "train/threads.hpp"

namespace longhaul::train::cli {
namespace {

namespace fs = std::filesystem;

// The default corpus: where this machine's Python keeps its standard library.
Result<std::string> python_stdlib() {
  FILE* p = popen("python3 -c 'import sysconfig; print(sysconfig.get_paths()[\"stdlib\"])'", "r");
  if (p == nullptr) return io_error("cannot run python3 to find the default corpus");
  char buf[4096] = {};
  const bool got = std::fgets(buf, sizeof(buf), p) != nullptr;
  const int rc = pclose(p);
  std::string path = got ? buf : "";
  while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
  if (rc != 0 || path.empty()) {
    return io_error("python3 did not report its stdlib path; pass --data FILE|DIR");
  }
  return path;
}

}  // namespace

Result<RunData> load_data(const Options& o) {
  std::vector<std::string> paths = o.data;
  if (paths.empty()) {
    Result<std::string> stdlib = python_stdlib();
    if (!stdlib) return stdlib.status();
    paths.push_back(*stdlib);
  }
  Result<Corpus> corpus = build_corpus(paths);
  if (!corpus) return corpus.status();
  RunData d{std::move(*corpus), 0.0};
  d.unigram = unigram_cross_entropy(d.corpus.train, d.corpus.val);
  std::fprintf(stderr,
               "corpus: %zu files (%zu held out), train %.1f MB, val %.1f MB; unigram entropy of "
               "val %.4f nats/byte\n",
               d.corpus.files.size(), d.corpus.val_files,
               static_cast<double>(d.corpus.train.size()) / 1e6,
               static_cast<double>(d.corpus.val.size()) / 1e6, d.unigram);
  return d;
}

std::vector<std::uint8_t> take_shard(const std::vector<std::uint8_t>& train, int shards,
                                     int index) {
  const std::size_t n = train.size(), k = static_cast<std::size_t>(shards);
  const std::size_t i = static_cast<std::size_t>(index);
  const auto begin = train.begin() + static_cast<std::ptrdiff_t>(i * n / k);
  const auto end = train.begin() + static_cast<std::ptrdiff_t>((i + 1) * n / k);
  return std::vector<std::uint8_t>(begin, end);
}

Result<Trainer> make_trainer(const Options& o) {
  Result<Trainer> made = Trainer::create(o.train);
  if (!made) return made.status();
  if (!o.resume.empty()) {
    const std::string path = RunFiles::resumed_from(o.resume).checkpoint;
    LH_RETURN_IF_ERROR(load_checkpoint(path, *made));
    std::fprintf(stderr, "resumed from %s at step %lld\n", path.c_str(),
                 static_cast<long long>(made->step_count()));
  }
  const GptConfig& mc = o.train.model;
  std::fprintf(stderr,
               "model: %zu parameters (layers %d, channels %d, heads %d, context %d); batch %d; "
               "%d threads\n",
               parameter_count(mc), mc.layers, mc.channels, mc.heads, mc.context, o.train.batch,
               thread_count());
  return made;
}

RunFiles RunFiles::in(const std::string& dir) {
  return {dir + "/log.csv", dir + "/checkpoint.bin", dir + "/engine.bin"};
}

RunFiles RunFiles::resumed_from(const std::string& resume) {
  if (fs::is_directory(resume)) return in(resume);
  const std::string dir = fs::path(resume).parent_path().string();
  return {"", resume, (dir.empty() ? std::string(".") : dir) + "/engine.bin"};
}

Result<CsvLog> open_output(const Options& o, bool peer_columns) {
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return io_error("cannot create " + o.out_dir + ": " + ec.message());
  const std::string csv = RunFiles::in(o.out_dir).csv;
  const bool append = !o.resume.empty() && fs::exists(csv);
  return CsvLog::open(csv, append, peer_columns);
}

}  // namespace longhaul::train::cli
