// The one error type of the core: a code from the C ABI plus a message. Nothing in the core
// throws; fallible functions return Status or Result<T>.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include "longhaul/longhaul.h"

namespace longhaul {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(lh_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == LH_OK; }
  explicit operator bool() const { return is_ok(); }
  lh_status code() const { return code_; }
  const std::string& message() const { return message_; }

  // "LH_ERR_PEER_LOST: connection reset by peer"
  std::string to_string() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status with_context(const std::string& context) const;

 private:
  lh_status code_ = LH_OK;
  std::string message_;
};

// The highest lh_status value this build knows (a decoder refuses any above it).
inline constexpr lh_status kLastStatus = LH_ERR_MISMATCH;

inline Status invalid_argument(std::string m) { return {LH_ERR_INVALID_ARGUMENT, std::move(m)}; }
inline Status peer_lost(std::string m) { return {LH_ERR_PEER_LOST, std::move(m)}; }
inline Status protocol_error(std::string m) { return {LH_ERR_PROTOCOL, std::move(m)}; }
inline Status auth_error(std::string m) { return {LH_ERR_AUTH, std::move(m)}; }
inline Status io_error(std::string m) { return {LH_ERR_IO, std::move(m)}; }
inline Status timeout_error(std::string m) { return {LH_ERR_TIMEOUT, std::move(m)}; }
inline Status closed_error(std::string m) { return {LH_ERR_CLOSED, std::move(m)}; }
inline Status aborted_error(std::string m) { return {LH_ERR_ABORTED, std::move(m)}; }
inline Status internal_error(std::string m) { return {LH_ERR_INTERNAL, std::move(m)}; }
inline Status node_evicted(std::string m) { return {LH_ERR_NODE_EVICTED, std::move(m)}; }
inline Status mismatch_error(std::string m) { return {LH_ERR_MISMATCH, std::move(m)}; }

// A value or the Status explaining why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace longhaul

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define LH_RETURN_IF_ERROR(expr)                    \
  do {                                              \
    ::longhaul::Status lh_status_tmp_ = (expr);     \
    if (!lh_status_tmp_.is_ok()) return lh_status_tmp_; \
  } while (0)
