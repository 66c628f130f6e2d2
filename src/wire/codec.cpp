#include "wire/codec.hpp"

#include <bit>

#include <fmt/format.h>

namespace longhaul::wire {

void Writer::f64(double v) { u64(std::bit_cast<uint64_t>(v)); }

void Writer::raw(std::span<const std::byte> data) { buf_.insert(buf_.end(), data.begin(), data.end()); }

void Writer::bytes(std::span<const std::byte> data) {
  u32(static_cast<uint32_t>(data.size()));
  raw(data);
}

void Writer::string(std::string_view s) { bytes(std::as_bytes(std::span(s.data(), s.size()))); }

Status Reader::need(size_t n) const {
  if (n > remaining())
    return protocol_error(fmt::format("message truncated: need {} bytes at offset {}, have {}", n,
                                      pos_, remaining()));
  return Status::ok();
}

Status Reader::u8(uint8_t* v) {
  LH_RETURN_IF_ERROR(need(1));
  *v = std::to_integer<uint8_t>(data_[pos_++]);
  return Status::ok();
}

Status Reader::i64(int64_t* v) {
  uint64_t u;
  LH_RETURN_IF_ERROR(u64(&u));
  *v = static_cast<int64_t>(u);
  return Status::ok();
}

Status Reader::f64(double* v) {
  uint64_t u;
  LH_RETURN_IF_ERROR(u64(&u));
  *v = std::bit_cast<double>(u);
  return Status::ok();
}

Status Reader::boolean(bool* v) {
  uint8_t b;
  LH_RETURN_IF_ERROR(u8(&b));
  if (b > 1) return protocol_error(fmt::format("invalid boolean value {}", b));
  *v = b == 1;
  return Status::ok();
}

Status Reader::raw(std::span<std::byte> out) {
  LH_RETURN_IF_ERROR(need(out.size()));
  if (!out.empty()) std::memcpy(out.data(), data_.data() + pos_, out.size());
  pos_ += out.size();
  return Status::ok();
}

Status Reader::length_prefixed(uint32_t max_len, const char* what,
                               std::span<const std::byte>* out) {
  uint32_t n;
  LH_RETURN_IF_ERROR(u32(&n));
  if (n > max_len)
    return protocol_error(fmt::format("{} of {} bytes exceeds limit {}", what, n, max_len));
  LH_RETURN_IF_ERROR(need(n));
  *out = data_.subspan(pos_, n);
  pos_ += n;
  return Status::ok();
}

Status Reader::bytes(std::vector<std::byte>* out, uint32_t max_len) {
  std::span<const std::byte> b;
  LH_RETURN_IF_ERROR(length_prefixed(max_len, "field", &b));
  out->assign(b.begin(), b.end());
  return Status::ok();
}

Status Reader::bytes(std::vector<uint8_t>* out, uint32_t max_len) {
  std::span<const std::byte> b;
  LH_RETURN_IF_ERROR(length_prefixed(max_len, "field", &b));
  const auto* first = reinterpret_cast<const uint8_t*>(b.data());
  out->assign(first, first + b.size());
  return Status::ok();
}

Status Reader::string(std::string* out, uint32_t max_len) {
  std::span<const std::byte> b;
  LH_RETURN_IF_ERROR(length_prefixed(max_len, "string", &b));
  out->assign(reinterpret_cast<const char*>(b.data()), b.size());
  return Status::ok();
}

Status Reader::count(uint32_t* n, size_t min_element_bytes, uint32_t max_count) {
  LH_RETURN_IF_ERROR(u32(n));
  if (*n > max_count) return protocol_error(fmt::format("count {} exceeds limit {}", *n, max_count));
  if (min_element_bytes > 0 && *n > remaining() / min_element_bytes)
    return protocol_error(fmt::format("count {} cannot fit in the {} bytes left", *n, remaining()));
  return Status::ok();
}

Status Reader::expect_end() const {
  if (remaining() != 0) return protocol_error(fmt::format("{} trailing bytes after message", remaining()));
  return Status::ok();
}

}  // namespace longhaul::wire
