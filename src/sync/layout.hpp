// A trainer's parameters as the sync engine sees them: ranges of its memory (f32 or bf16) and a
// layout of fragments over them. Fragment f is a list of pieces (a run of elements of one range);
// its elements, in piece order, are what the engine keeps a global copy of (fp32), forms the
// pseudo-gradient of and merges back. Streaming DiLoCo syncs one fragment at a time; DiLoCo has
// one fragment holding everything.
//
// The layout only points at the caller's memory, which must outlive it and must not be written
// while a call of the engine reads or merges it. Every element of every range belongs to at most
// one fragment (elements in none are trained locally and never synced).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/status.hpp"
#include "quant/dtype.hpp"

namespace longhaul::runtime {
class WorkerPool;
}

namespace longhaul::sync {

struct ParamRange {
  void* data = nullptr;
  size_t count = 0;
  quant::DType dtype = quant::DType::kF32;  // f32 or bf16
};

struct FragmentPiece {
  uint32_t fragment = 0;
  uint32_t range = 0;
  size_t offset = 0;  // first element in the range
  size_t count = 0;
};

class Layout {
 public:
  // Validates and builds a layout of `fragments` fragments. No pieces: range i goes whole to
  // fragment i mod `fragments` (one tensor per range: strided over the fragments, as Streaming
  // DiLoCo assigns layers). LH_ERR_INVALID_ARGUMENT for no ranges, a null range, a piece outside
  // its range, pieces that overlap, a fragment that gets no element; LH_ERR_UNSUPPORTED for a
  // dtype other than f32 and bf16.
  static Result<Layout> make(std::vector<ParamRange> ranges, std::vector<FragmentPiece> pieces,
                             uint32_t fragments);

  size_t fragments() const { return fragment_sizes_.size(); }
  size_t fragment_size(size_t f) const { return fragment_sizes_[f]; }
  size_t largest_fragment() const;
  size_t total_elements() const;

  // body(position, values) for every chunk of fragment f, chunks in parallel on `workers`:
  // `values` are the local parameters at fragment positions [position, position + size), as
  // f32, and whatever body leaves in them is written back (bf16: rounded to nearest even). body
  // must not throw and touches only its chunk. `write_back` false: body only reads.
  using ChunkBody = std::function<void(size_t position, std::span<float> values)>;
  void update(size_t f, const ChunkBody& body, runtime::WorkerPool& workers,
              bool write_back = true) const;
  // Copies fragment f of the local parameters into `out` (fragment_size(f) floats).
  void read(size_t f, std::span<float> out, runtime::WorkerPool& workers) const;
  // θ_local ← α·θ_local + (1 − α)·global over fragment f (outer_rules.hpp: mix).
  void merge(size_t f, std::span<const float> global, float alpha,
             runtime::WorkerPool& workers) const;

 private:
  struct Piece {
    ParamRange range;
    size_t offset = 0;  // in the range
    size_t count = 0;
    size_t position = 0;  // in the fragment
  };
  std::vector<std::vector<Piece>> fragment_pieces_;
  std::vector<size_t> fragment_sizes_;
};

}  // namespace longhaul::sync
