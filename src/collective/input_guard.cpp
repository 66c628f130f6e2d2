#include "collective/input_guard.hpp"

#include <cstring>

#include "collective/stream_copy.hpp"

namespace longhaul::collective {

InputGuard::InputGuard(const GuardedBuffers& buffers, const Partition& part)
    : buffers_(buffers),
      part_(part),
      elem_(quant::element_size(buffers.dtype)),
      in_place_(buffers.input == buffers.output),
      keep_backup_(in_place_ && buffers.keep_backup) {}

Status InputGuard::prepare(BufferPool& pool) {
  if (keep_backup_) {
    auto backup = pool.acquire(buffers_.count * elem_);
    if (!backup) return backup.status();
    backup_ = std::move(*backup);
  }
  if (buffers_.residual) {
    auto copy = pool.acquire(buffers_.count * sizeof(float));
    if (!copy) return copy.status();
    residual_backup_ = std::move(*copy);
    std::memcpy(residual_backup_.data(), buffers_.residual, buffers_.count * sizeof(float));
  }
  touched_.assign(part_.members() * part_.segments(), 0);
  return Status::ok();
}

bool InputGuard::claim(size_t chunk, size_t seg) {
  auto& done = touched_[chunk * part_.segments() + seg];
  if (done) return false;
  done = 1;
  return true;
}

void InputGuard::touch(size_t begin, size_t count) {
  const size_t offset = begin * elem_, bytes = count * elem_;
  if (bytes == 0) return;
  auto* output = static_cast<std::byte*>(buffers_.output);
  // The backup is read only on failure: stream it past the caches, which keep the segment itself
  // for the reduction that follows.
  if (keep_backup_)
    copy_streaming(backup_.data() + offset, output + offset, bytes);
  else if (!in_place_)
    std::memcpy(output + offset, static_cast<const std::byte*>(buffers_.input) + offset, bytes);
}

void InputGuard::touch_segment(size_t chunk, size_t seg) {
  if (!claim(chunk, seg)) return;
  const Range range = part_.segment(chunk, seg);
  touch(range.begin, range.count);
}

void InputGuard::keep_all() {
  for (size_t c = 0; c < part_.members(); ++c)
    for (size_t j = 0; j < part_.segments(); ++j) touch_segment(c, j);
}

void InputGuard::restore() {
  if (keep_backup_ && touched_.size() == part_.members() * part_.segments()) {
    auto* output = static_cast<std::byte*>(buffers_.output);
    for (size_t c = 0; c < part_.members(); ++c)
      for (size_t j = 0; j < part_.segments(); ++j) {
        if (!touched_[c * part_.segments() + j]) continue;  // never written
        const Range range = part_.segment(c, j);
        std::memcpy(output + range.begin * elem_, backup_.data() + range.begin * elem_,
                    range.count * elem_);
      }
  }
  if (residual_backup_)
    std::memcpy(buffers_.residual, residual_backup_.data(), buffers_.count * sizeof(float));
}

void InputGuard::release() {
  backup_.reset();
  residual_backup_.reset();
}

}  // namespace longhaul::collective
