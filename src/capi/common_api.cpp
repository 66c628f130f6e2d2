// Process-wide functions of longhaul.h.
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "capi/handles.hpp"
#include "common/log.hpp"
#include "common/secret_file.hpp"

namespace longhaul::capi {
namespace {
thread_local std::string t_last_error;
}

lh_status fail(const Status& s) {
  t_last_error = s.to_string();
  return s.code();
}

lh_status null_argument(const char* function) {
  return fail(invalid_argument(fmt::format("{}: NULL argument", function)));
}

const char* thread_last_error() {
  return t_last_error.c_str();
}

Status handle_status(const lh_comm* comm, const char* function) {
  if (!comm) return invalid_argument(fmt::format("{}: NULL argument", function));
  if (comm->impl) return Status::ok();
  return closed_error(fmt::format(
      "{}: communicator #{} was destroyed (lh_comm_destroy); its handle is of no further use",
      function, comm->generation));
}

Status open_status(const lh_comm* comm, const char* function) {
  LH_RETURN_IF_ERROR(handle_status(comm, function));
  return comm->impl->usable().with_context(function);
}

lh_status check_handle(lh_comm* comm, const char* function) {
  const Status s = handle_status(comm, function);
  return comm ? finish(comm, s) : fail(s);
}

lh_status check_open(lh_comm* comm, const char* function) {
  const Status s = open_status(comm, function);
  return comm ? finish(comm, s) : fail(s);
}

}  // namespace longhaul::capi

extern "C" const char* lh_last_error(void) {
  return longhaul::capi::thread_last_error();
}

extern "C" lh_status lh_set_log_level(const char* level) {
  longhaul::log::Level l;
  if (!level || !longhaul::log::parse_level(level, &l))
    return longhaul::capi::fail(longhaul::invalid_argument(
        std::string("log level must be debug, info, warn, error or off, got '") +
        (level ? level : "(null)") + "'"));
  longhaul::log::set_level(l);
  return LH_OK;
}

extern "C" lh_status lh_secret_from_file(const char* path, int allow_weak, char* secret,
                                         size_t capacity, size_t* length) {
  namespace lh = longhaul;
  if (!path || !secret || !length) return lh::capi::null_argument("lh_secret_from_file");
  static_assert(LH_SECRET_MAX_BYTES == lh::kMaxSecretBytes);
  static_assert(LH_SECRET_MIN_BYTES == lh::kMinSecretBytes);
  try {
    auto read = lh::read_secret_file(path, allow_weak != 0);
    if (!read) return lh::capi::fail(read.status());
    if (read->size() >= capacity) {
      *length = read->size();
      return lh::capi::fail(lh::invalid_argument(
          fmt::format("lh_secret_from_file: the secret has {} bytes; the buffer of {} has no room "
                      "for them and the NUL",
                      read->size(), capacity)));
    }
    std::memcpy(secret, read->data(), read->size());
    secret[read->size()] = '\0';
    *length = read->size();
    return LH_OK;
  } catch (const std::exception& e) {
    return lh::capi::fail(lh::internal_error(fmt::format("lh_secret_from_file: {}", e.what())));
  }
}
