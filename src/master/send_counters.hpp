// What the master has written to its control links since it started, by message type: how its
// control traffic grows with the size of a run (bench/run scale) and which messages cost most.
// Counted as the peers count their links (lh_traffic): a frame's 32-byte header with its payload.
//
// Runs on the master's strand like the rest of the server; not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "net/frame.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::master {

struct SentTotals {
  uint64_t messages = 0;
  uint64_t bytes = 0;
};

class SendCounters {
 public:
  // One message of `type` whose encoding is `payload_bytes` long was handed to a link.
  void count(wire::ControlType type, size_t payload_bytes) {
    SentTotals& t = by_type_[type];
    t.messages += 1;
    t.bytes += payload_bytes + net::kFrameHeaderBytes;
  }
  // By message name (wire::control_type_name), types never sent left out.
  std::map<std::string, SentTotals> by_name() const {
    std::map<std::string, SentTotals> out;
    for (const auto& [type, t] : by_type_) out[wire::control_type_name(type)] = t;
    return out;
  }

 private:
  std::map<wire::ControlType, SentTotals> by_type_;
};

}  // namespace longhaul::master
