// "host:port" / "[ipv6]:port" addresses, as every flag and option of longhaul writes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.hpp"

namespace longhaul {

// Splits `text` into host and port (0..65535); LH_ERR_INVALID_ARGUMENT says what is wrong.
Status parse_host_port(std::string_view text, std::string* host, uint16_t* port);

}  // namespace longhaul
