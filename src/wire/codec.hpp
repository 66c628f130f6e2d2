// The one bounds-checked binary codec for every control message longhaul puts on the wire.
//
// Encoding: little-endian fixed-width integers; `bytes` and `string` are a u32 length followed by
// that many bytes; sequences are a u32 count followed by the elements. A Reader never reads past
// its span and never allocates more than the bytes that are actually present, so a hostile length
// field cannot make it allocate or read out of bounds; every failure is a Status, never a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace longhaul::wire {

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(static_cast<std::byte>(v)); }
  void u16(uint16_t v) { put_le(v); }
  void u32(uint32_t v) { put_le(v); }
  void u64(uint64_t v) { put_le(v); }
  void i64(int64_t v) { put_le(static_cast<uint64_t>(v)); }
  void f64(double v);
  void boolean(bool v) { u8(v ? 1 : 0); }
  // Raw bytes with no length prefix (fixed-size fields such as nonces and MACs).
  void raw(std::span<const std::byte> data);
  // u32 length + bytes.
  void bytes(std::span<const std::byte> data);
  void string(std::string_view s);

  const std::vector<std::byte>& buffer() const { return buf_; }
  std::vector<std::byte> take() { return std::move(buf_); }

 private:
  template <class T>
  void put_le(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) buf_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  std::vector<std::byte> buf_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> data) : data_(data) {}

  Status u8(uint8_t* v);
  Status u16(uint16_t* v) { return get_le(v); }
  Status u32(uint32_t* v) { return get_le(v); }
  Status u64(uint64_t* v) { return get_le(v); }
  Status i64(int64_t* v);
  Status f64(double* v);
  Status boolean(bool* v);
  // Exactly out.size() raw bytes.
  Status raw(std::span<std::byte> out);
  // u32 length + bytes; the length must not exceed `max_len` nor the bytes left.
  Status bytes(std::vector<std::byte>* out, uint32_t max_len = UINT32_MAX);
  Status bytes(std::vector<uint8_t>* out, uint32_t max_len = UINT32_MAX);
  Status string(std::string* out, uint32_t max_len = UINT32_MAX);
  // A u32 element count, checked against the bytes left assuming each element needs at least
  // `min_element_bytes`, so a caller can reserve() the result safely.
  Status count(uint32_t* n, size_t min_element_bytes, uint32_t max_count = UINT32_MAX);

  size_t remaining() const { return data_.size() - pos_; }
  // Fails unless every byte was consumed: trailing garbage is a protocol error.
  Status expect_end() const;

 private:
  Status need(size_t n) const;
  // A u32 length within `max_len` (else an error naming `what`) and the bytes left, then that many
  // bytes: their span, in place.
  Status length_prefixed(uint32_t max_len, const char* what, std::span<const std::byte>* out);
  template <class T>
  Status get_le(T* v) {
    LH_RETURN_IF_ERROR(need(sizeof(T)));
    T r = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      r = static_cast<T>(r | (static_cast<T>(std::to_integer<uint8_t>(data_[pos_ + i])) << (8 * i)));
    pos_ += sizeof(T);
    *v = r;
    return Status::ok();
  }

  std::span<const std::byte> data_;
  size_t pos_ = 0;
};

}  // namespace longhaul::wire
