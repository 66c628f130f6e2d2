// Training text as bytes, a held-out validation split, and reproducible batches.
//
// Corpus: the files given, in the order given; a directory stands for every *.py file below it
// (site-packages and dist-packages excluded: they are installed packages, not the library), in
// sorted path order. Every tenth file (index % 10 == 9) is held out for validation; when that
// leaves validation empty (fewer than ten files) the last tenth of the bytes is held out instead.
//
// Batches: training batch k is B windows of T+1 bytes at offsets drawn from a generator seeded by
// (seed, k), so batch k is the same whether or not batches 0..k-1 were drawn: the data position
// of a run is just k. Validation batches are fixed, evenly spaced windows of the held-out split.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace longhaul::train {

struct Corpus {
  std::vector<std::uint8_t> train;
  std::vector<std::uint8_t> val;
  std::vector<std::string> files;  // in corpus order
  std::size_t val_files = 0;       // how many of them were held out
};

Result<Corpus> build_corpus(const std::vector<std::string>& paths);

// Unigram (byte-frequency) entropy in nats of `text` under the byte distribution of
// `reference`, i.e. the cross-entropy of the best context-free predictor fitted on reference.
double unigram_cross_entropy(const std::vector<std::uint8_t>& reference,
                             const std::vector<std::uint8_t>& text);

struct Batch {
  int B = 0, T = 0;
  std::vector<int> inputs;   // (B, T)
  std::vector<int> targets;  // (B, T): inputs shifted by one byte
};

// Training batch number `index` (see above). The split must hold at least T + 1 bytes.
Result<Batch> train_batch(const std::vector<std::uint8_t>& split, int B, int T, std::uint64_t seed,
                          std::uint64_t index);

// Validation batch `index` of `count`: windows spread evenly over the split.
Result<Batch> val_batch(const std::vector<std::uint8_t>& split, int B, int T, int index, int count);

}  // namespace longhaul::train
