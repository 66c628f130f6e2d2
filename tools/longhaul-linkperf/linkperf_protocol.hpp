// The tiny request protocol longhaul-linkperf speaks over a link's control messages, shared by the
// tool and the tests that use it as a remote peer.
//
//   request  (client -> server): command, op id, bytes
//   response (server -> client): command, op id, status code
//
// kReceive asks the server to receive op `id` of `bytes` and answer when it has every byte;
// kSend asks it to send op `id` of `bytes` (deterministic pattern data) and answer when sent.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.hpp"
#include "wire/codec.hpp"

namespace longhaul::linkperf {

enum class Command : uint8_t { kReceive = 1, kSend = 2 };

struct Message {
  Command command = Command::kReceive;
  uint64_t op_id = 0;
  uint64_t value = 0;  // bytes in a request, an lh_status in a response
};

inline std::vector<std::byte> encode(const Message& m) {
  wire::Writer w;
  w.u8(static_cast<uint8_t>(m.command));
  w.u64(m.op_id);
  w.u64(m.value);
  return w.take();
}

inline Status decode(std::span<const std::byte> bytes, Message* m) {
  wire::Reader r(bytes);
  uint8_t command;
  LH_RETURN_IF_ERROR(r.u8(&command));
  if (command != static_cast<uint8_t>(Command::kReceive) && command != static_cast<uint8_t>(Command::kSend))
    return protocol_error("unknown linkperf command");
  m->command = static_cast<Command>(command);
  LH_RETURN_IF_ERROR(r.u64(&m->op_id));
  LH_RETURN_IF_ERROR(r.u64(&m->value));
  return r.expect_end();
}

}  // namespace longhaul::linkperf
