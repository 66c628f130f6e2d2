// Scratch buffers for collectives, kept warm across operations.
//
// A large all-reduce needs hundreds of MiB of scratch (the staging of segments in flight, the
// backup of an in-place input). Allocated fresh for every operation, each page of it is a page
// fault and a zero-fill on first touch: ~0.4 s of system time per 256 MiB operation. The pool
// hands out buffers that earlier operations released, so a steady stream of operations touches
// warm memory.
//
// Every buffer has one owner at a time (concurrent operations never share one). Idle buffers are
// bounded: beyond `max_idle_bytes` the least recently released are freed, and when the machine is
// short of memory (MemAvailable below 1/8 of MemTotal, checked at most every 100 ms) every idle
// buffer is freed and released buffers are not kept. Destroying the pool frees every idle buffer;
// a buffer still held then is freed when its holder lets go. Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

#include "common/status.hpp"

namespace longhaul::collective {

class BufferPool {
 public:
  struct State;

  // Move-only ownership of one buffer; returns it to its pool when destroyed. Its contents are
  // unspecified when acquired (whatever the previous holder left).
  class Buffer {
   public:
    Buffer() = default;
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&& other) noexcept;
    ~Buffer();

    std::byte* data() const { return data_; }
    size_t size() const { return size_; }  // the bytes asked for (capacity may be larger)
    std::span<std::byte> span() const { return {data_, size_}; }
    explicit operator bool() const { return data_ != nullptr; }
    // Gives the buffer back now.
    void reset();

   private:
    friend class BufferPool;
    std::shared_ptr<State> pool_;
    std::byte* data_ = nullptr;
    size_t size_ = 0;
    size_t capacity_ = 0;
  };

  explicit BufferPool(size_t max_idle_bytes = size_t{1} << 30);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least `bytes` (an empty Buffer for 0). Reuses an idle buffer whose capacity
  // is at least `bytes` and at most twice it, else maps a new one (LH_ERR_IO when the system
  // refuses the memory).
  Result<Buffer> acquire(size_t bytes);
  // Frees every idle buffer.
  void release_idle();
  size_t idle_bytes() const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace longhaul::collective
