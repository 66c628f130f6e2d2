// The three walks over a control message's field list (control_messages.cpp). Each message type
// lists its fields once, in wire order, as `fields(v, m)`: a function template that calls one
// operation of the visitor `v` per field. FieldWriter encodes them, FieldReader decodes and
// bounds-checks them, MinWireBytes measures the fewest bytes an encoding can take. Since the
// encoder and the decoder walk the same list, they cannot disagree on the format.
//
// The operations every visitor offers (T& for FieldReader, const T& for the others):
//   u8 u16 u32 u64 boolean            fixed-width integers and a 0/1 byte
//   string(s, max_len[, min_len])     u32 length + bytes; the length within [min_len, max_len]
//   bytes(b, max_len)                 u32 length + bytes (std::byte or uint8_t elements)
//   status(code, StatusField)         an lh_status as u32: any code, or only failures
//   enumeration(e, last)              a u8-based enum whose values run from 0 to `last`
//   list(items[, max_count])          u32 count, then fields(v, item) for each item
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "common/status.hpp"
#include "wire/codec.hpp"

namespace longhaul::wire {

enum class StatusField { kAny, kFailure };
inline constexpr uint32_t kNoLimit = UINT32_MAX;

class FieldWriter {
 public:
  explicit FieldWriter(Writer& w) : w_(w) {}

  void u8(uint8_t v) { w_.u8(v); }
  void u16(uint16_t v) { w_.u16(v); }
  void u32(uint32_t v) { w_.u32(v); }
  void u64(uint64_t v) { w_.u64(v); }
  void boolean(bool v) { w_.boolean(v); }
  void string(const std::string& s, uint32_t /*max_len*/, uint32_t /*min_len*/ = 0) {
    w_.string(s);
  }
  void bytes(const std::vector<std::byte>& b, uint32_t /*max_len*/) { w_.bytes(b); }
  void bytes(const std::vector<uint8_t>& b, uint32_t /*max_len*/) {
    w_.bytes(std::as_bytes(std::span(b)));
  }
  void status(lh_status code, StatusField) { w_.u32(static_cast<uint32_t>(code)); }
  template <class E>
  void enumeration(E e, E /*last*/) {
    static_assert(std::is_same_v<std::underlying_type_t<E>, uint8_t>);
    w_.u8(static_cast<uint8_t>(e));
  }
  template <class T>
  void list(const std::vector<T>& items, uint32_t /*max_count*/ = kNoLimit) {
    w_.u32(static_cast<uint32_t>(items.size()));
    for (const T& item : items) fields(*this, item);
  }

 private:
  Writer& w_;
};

// Counts the bytes of the shortest encoding: what a list's count check assumes of each element, so
// that a hostile count cannot make the decoder allocate more elements than the bytes left can hold.
class MinWireBytes {
 public:
  size_t total = 0;

  void u8(uint8_t) { total += 1; }
  void u16(uint16_t) { total += 2; }
  void u32(uint32_t) { total += 4; }
  void u64(uint64_t) { total += 8; }
  void boolean(bool) { total += 1; }
  void string(const std::string&, uint32_t, uint32_t min_len = 0) { total += 4 + min_len; }
  template <class B>
  void bytes(const std::vector<B>&, uint32_t) {
    total += 4;
  }
  void status(lh_status, StatusField) { total += 4; }
  template <class E>
  void enumeration(E, E) {
    total += 1;
  }
  template <class T>
  void list(const std::vector<T>&, uint32_t = kNoLimit) {
    total += 4;
  }
};

template <class T>
size_t min_wire_bytes() {
  static const size_t bytes = [] {
    MinWireBytes m;
    const T item{};
    fields(m, item);
    return m.total;
  }();
  return bytes;
}

// Reads each field in turn. The first failure sticks: every later operation reads nothing (a list
// after it is left empty), so a field list needs no error handling of its own; result() has it.
class FieldReader {
 public:
  explicit FieldReader(Reader& r) : r_(r) {}

  const Status& result() const { return status_; }

  void u8(uint8_t& v) {
    read([&] { return r_.u8(&v); });
  }
  void u16(uint16_t& v) {
    read([&] { return r_.u16(&v); });
  }
  void u32(uint32_t& v) {
    read([&] { return r_.u32(&v); });
  }
  void u64(uint64_t& v) {
    read([&] { return r_.u64(&v); });
  }
  void boolean(bool& v) {
    read([&] { return r_.boolean(&v); });
  }
  void string(std::string& s, uint32_t max_len, uint32_t min_len = 0) {
    read([&] {
      Status st = r_.string(&s, max_len);
      if (st && s.size() < min_len)
        return protocol_error(
            fmt::format("string of {} bytes, at least {} needed", s.size(), min_len));
      return st;
    });
  }
  void bytes(std::vector<std::byte>& b, uint32_t max_len) {
    read([&] { return r_.bytes(&b, max_len); });
  }
  void bytes(std::vector<uint8_t>& b, uint32_t max_len) {
    read([&] { return r_.bytes(&b, max_len); });
  }
  void status(lh_status& code, StatusField allowed) {
    read([&] {
      uint32_t v = 0;
      LH_RETURN_IF_ERROR(r_.u32(&v));
      if ((v == LH_OK && allowed == StatusField::kFailure) || v > kLastStatus)
        return protocol_error(fmt::format("invalid status code {}", v));
      code = static_cast<lh_status>(v);
      return Status::ok();
    });
  }
  template <class E>
  void enumeration(E& e, E last) {
    read([&] {
      uint8_t v = 0;
      LH_RETURN_IF_ERROR(r_.u8(&v));
      if (v > static_cast<uint8_t>(last))
        return protocol_error(
            fmt::format("enum value {} out of range 0..{}", v, static_cast<uint8_t>(last)));
      e = static_cast<E>(v);
      return Status::ok();
    });
  }
  template <class T>
  void list(std::vector<T>& items, uint32_t max_count = kNoLimit) {
    uint32_t n = 0;
    read([&] { return r_.count(&n, min_wire_bytes<T>(), max_count); });
    if (!status_) return;  // n may hold the refused count
    items.resize(n);       // at most what the bytes left can hold
    for (T& item : items) fields(*this, item);
  }

 private:
  template <class Read>
  void read(Read&& op) {
    if (status_) status_ = op();
  }

  Reader& r_;
  Status status_;
};

}  // namespace longhaul::wire
