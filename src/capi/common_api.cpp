// Process-wide functions of longhaul.h.
#include <string>

#include <fmt/format.h>

#include "capi/handles.hpp"
#include "common/log.hpp"

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
