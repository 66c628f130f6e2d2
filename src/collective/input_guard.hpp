// Keeps a caller's input safe across an operation that may fail: all or nothing for the caller's
// buffers, whatever the network does.
//
// The operation's output is first written segment by segment; the first touch of each segment
// (by its one designated toucher, never two threads at once) either copies the input in (out of
// place) or keeps the original in a backup (in place), so a failed in-place operation puts back
// exactly what it touched, and no caller thread copies the whole buffer up front. The backup is
// written around the caches (it is read only on failure). An error-feedback residual is kept
// whole. The batch call guards each of its items the same way, all of it at once (keep_all).
//
// Not thread-safe by itself: claims are per segment and the owner orders restore() after every
// touch (the operation restores once nothing is in flight).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "collective/buffer_pool.hpp"
#include "collective/partition.hpp"
#include "common/status.hpp"
#include "quant/dtype.hpp"

namespace longhaul::collective {

struct GuardedBuffers {
  const void* input = nullptr;
  void* output = nullptr;  // may equal input
  size_t count = 0;
  quant::DType dtype = quant::DType::kF32;
  // In place: keep originals for restore() (off: the caller waived the restore).
  bool keep_backup = true;
  float* residual = nullptr;  // count floats, kept whole when set
};

class InputGuard {
 public:
  // `part` cuts the buffer into the segments that are touched one by one.
  InputGuard(const GuardedBuffers& buffers, const Partition& part);
  InputGuard(InputGuard&&) = default;

  // Moves the output (before prepare): a reduce-scatter works in scratch it takes later.
  void set_output(void* output) { buffers_.output = output; }
  // Takes the scratch the guard needs (the backup, the residual's copy) and copies the residual.
  Status prepare(BufferPool& pool);
  // The first touch of a segment: true exactly once per segment, for the caller that must copy.
  bool claim(size_t chunk, size_t seg);
  // The first-touch copy of `count` elements from element `begin` (a part of a claimed segment).
  void touch(size_t begin, size_t count);
  // claim() and, if it was the first, touch() of the whole segment.
  void touch_segment(size_t chunk, size_t seg);
  // Touches every segment now (the batch call: its inputs are guarded before anything starts).
  void keep_all();
  // Puts back every touched segment's original and the residual. Nothing may touch the buffers
  // meanwhile.
  void restore();
  // Hands the scratch back to its pool.
  void release();

 private:
  GuardedBuffers buffers_;
  const Partition part_;
  const size_t elem_;
  const bool in_place_;
  const bool keep_backup_;
  BufferPool::Buffer backup_;
  BufferPool::Buffer residual_backup_;
  std::vector<uint8_t> touched_;  // by chunk * segments + segment; written by its first toucher
};

}  // namespace longhaul::collective
