// A trainer's parameters as the sync engine sees them: ranges of its memory (f32 or bf16) and a
// layout of fragments over them. Fragment f is a list of pieces (a run of elements of one range);
// its elements, in piece order, are what the engine keeps a global copy of (fp32), forms the
// pseudo-gradient of and merges back. Streaming DiLoCo syncs one fragment at a time; DiLoCo has
// one fragment holding everything.
//
// The layout only points at the caller's memory, which must outlive it and must not be written
// while a call of the engine reads or merges it. Every element of every range belongs to at most
// one fragment (elements in none are trained locally and never synced). Ranges in device memory
// are reached through a host mirror (device_copies.hpp): a fragment's device pieces are copied in
// before each read and back out after each write, so the arithmetic is the host's, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/status.hpp"
#include "quant/dtype.hpp"
#include "sync/device_copies.hpp"

namespace longhaul::runtime {
class WorkerPool;
}

namespace longhaul::sync {

struct ParamRange {
  void* data = nullptr;
  size_t count = 0;
  quant::DType dtype = quant::DType::kF32;  // f32 or bf16
  bool on_device = false;                   // device memory, reached through DeviceCopies
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
  // dtype other than f32 and bf16. Ranges on the device need `device` (else
  // LH_ERR_INVALID_ARGUMENT); the layout takes from it one host mirror, the size of the largest
  // fragment's device pieces, and fails with its error when it cannot.
  static Result<Layout> make(std::vector<ParamRange> ranges, std::vector<FragmentPiece> pieces,
                             uint32_t fragments, std::shared_ptr<DeviceCopies> device = nullptr);

  size_t fragments() const { return fragment_sizes_.size(); }
  size_t fragment_size(size_t f) const { return fragment_sizes_[f]; }
  size_t largest_fragment() const;
  size_t total_elements() const;
  // Bytes of the host mirror of device pieces (0 without any).
  size_t mirror_bytes() const { return mirror_bytes_; }

  // body(position, values) for every chunk of fragment f, chunks in parallel on `workers`:
  // `values` are the local parameters at fragment positions [position, position + size), as
  // f32, and whatever body leaves in them is written back (bf16: rounded to nearest even). body
  // must not throw and touches only its chunk. `write_back` false: body only reads. Fails only
  // with a copy to or from the device (body has not run when the copy in failed; when the copy
  // out failed, the device pieces hold unspecified values).
  using ChunkBody = std::function<void(size_t position, std::span<float> values)>;
  Status update(size_t f, const ChunkBody& body, runtime::WorkerPool& workers,
                bool write_back = true) const;
  // Copies fragment f of the local parameters into `out` (fragment_size(f) floats).
  Status read(size_t f, std::span<float> out, runtime::WorkerPool& workers) const;
  // θ_local ← α·θ_local + (1 − α)·global over fragment f (outer_rules.hpp: mix).
  Status merge(size_t f, std::span<const float> global, float alpha,
               runtime::WorkerPool& workers) const;

 private:
  struct Piece {
    ParamRange range;  // host memory: the caller's, or the mirror for a device piece
    uint32_t range_index = 0;
    size_t offset = 0;  // in the range
    size_t count = 0;
    size_t position = 0;  // in the fragment
  };
  // A device piece and its place in the mirror.
  struct Transfer {
    uint32_t range = 0;
    void* device = nullptr;
    std::byte* host = nullptr;
    size_t bytes = 0;
  };
  Status place_device_pieces(std::shared_ptr<DeviceCopies> device);
  // update() for a body that overwrites every value without reading it: the device pieces are
  // not copied in.
  Status overwrite(size_t f, const ChunkBody& body, runtime::WorkerPool& workers) const;
  void run_chunks(size_t f, const ChunkBody& body, runtime::WorkerPool& workers,
                  bool write_back) const;
  // Copies fragment f's device pieces between the device and the mirror.
  Status stage(size_t f, bool to_device) const;

  std::vector<std::vector<Piece>> fragment_pieces_;
  std::vector<size_t> fragment_sizes_;
  std::vector<std::vector<Transfer>> transfers_;  // per fragment
  std::shared_ptr<DeviceCopies> device_;
  std::shared_ptr<std::byte> mirror_;
  size_t mirror_bytes_ = 0;
};

}  // namespace longhaul::sync
