// The input format of the wire_fuzz target, shared by the fuzzer and the seed generator.
//
//   byte 0        mode (taken modulo kModeCount)
//   bytes 1..     the mode's input:
//
//   kReaderProgram  [L: u8] [L program bytes] [stream]: each program byte is one Reader call
//                   on the stream, op = byte & 0x0f (modulo kOpCount), arg = byte >> 4.
//   kFrameHeader    [32-byte header] [optional: max_control u32 LE, max_data u32 LE]
//   kHello .. kReject  the message's payload exactly as it travels in its frame.
//   kControl        a CONTROL frame's payload (wire::decode_control: every control message,
//                   the shared-state ones included).
//   kFrameStream    [32-byte header] [payload]: the header is decoded with the default limits and,
//                   for handshake types, the payload with the type's decoder (as a connection
//                   does).
//   kPreAuthStream  [expected type: u8] [32-byte header] [payload]: a frame as the handshake reads
//                   it before authentication: only handshake types, and never more than
//                   kMaxHandshakePayload allocated, whatever the header announces.
#pragma once

#include <cstddef>
#include <cstdint>

namespace longhaul::fuzz {

enum Mode : uint8_t {
  kReaderProgram = 0,
  kFrameHeader = 1,
  kHello = 2,
  kHelloAck = 3,
  kAuth = 4,
  kReject = 5,
  kFrameStream = 6,
  kControl = 7,
  kPreAuthStream = 8,
  kModeCount = 9,
};

enum Op : uint8_t {
  kOpU8 = 0,
  kOpU16 = 1,
  kOpU32 = 2,
  kOpU64 = 3,
  kOpI64 = 4,
  kOpF64 = 5,
  kOpBool = 6,
  kOpRaw = 7,     // raw(arg * 4 bytes)
  kOpBytes = 8,   // bytes(max_len = kLimits[arg])
  kOpString = 9,  // string(max_len = kLimits[arg])
  kOpCount = 10,  // count(min_element_bytes = kMinElement[arg & 3], max_count = kLimits[(arg >> 2)
                  // * 4 + 3])
  kOpEnd = 11,    // expect_end (does not stop the program when it fails)
  kOpKinds = 12,
};

inline constexpr uint32_t kLimits[16] = {0,  1,  2,  3,   4,   7,   8,     16,
                                         31, 32, 64, 255, 256, 512, 65535, UINT32_MAX};
inline constexpr size_t kMinElement[4] = {0, 1, 4, 32};

constexpr uint8_t op_byte(Op op, uint8_t arg = 0) {
  return static_cast<uint8_t>((arg << 4) | op);
}

}  // namespace longhaul::fuzz
