// The frame: the unit every longhaul connection carries.
//
// Every frame is a fixed 32-byte header followed by `length` payload bytes:
//
//   offset size field
//        0    2 marker   0x4C48 ("LH"); anything else means the stream is not (or no longer) ours
//        2    1 type     FrameType
//        3    1 flags    per-type bits, zero unless documented
//        4    4 length   payload bytes that follow
//        8    8 op_id    the operation a DATA segment belongs to (0 otherwise)
//       16    8 offset   where a DATA segment's payload lands inside its operation
//       24    8 total    the whole operation's byte count (DATA); 0 otherwise
//
// All integers little-endian. Limits on `length` are enforced per type before any payload byte is
// read or any buffer allocated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.hpp"

namespace longhaul::net {

enum class FrameType : uint8_t {
  kHello = 1,     // handshake: client introduces itself (HelloMessage)
  kHelloAck = 2,  // handshake: server answers and proves the secret (HelloAckMessage)
  kAuth = 3,      // handshake: client proves the secret (AuthMessage)
  kAccept = 4,    // handshake: server admits the connection (empty payload)
  kReject = 5,    // handshake or later: the sender refuses/ends the connection (RejectMessage)
  kData = 6,      // a segment of a data operation, written in place at (op_id, offset)
  kControl = 7,   // an opaque control message (wire-codec encoded by the layer above)
  kPing = 8,      // liveness probe; answered by kPong with the same op_id
  kPong = 9,
  kCancel = 10,  // every op whose id matches op_id on the bits set in `offset` (the mask) is
                 // abandoned, now and later, at both ends
};

// HELLO, HELLO_ACK, AUTH, ACCEPT and REJECT: the only frames read before authentication.
bool is_handshake(FrameType t);

inline constexpr size_t kFrameHeaderBytes = 32;
inline constexpr uint16_t kFrameMarker = 0x4C48;
// Handshake frames are tiny; capping them stops an unauthenticated client from making us
// allocate or wait for more.
inline constexpr uint32_t kMaxHandshakePayload = 1024;
// A CANCEL frame carries no payload, or (protocol version 14) the text of a mismatch: the
// members called a collective differently (collective/signature.hpp), and every member must fail
// with that reason rather than a bare "cancelled".
inline constexpr uint32_t kMaxCancelReason = 1024;

struct FrameHeader {
  FrameType type = FrameType::kControl;
  uint8_t flags = 0;
  uint32_t length = 0;
  uint64_t op_id = 0;
  uint64_t offset = 0;
  uint64_t total = 0;
};

using EncodedHeader = std::array<std::byte, kFrameHeaderBytes>;

struct FrameLimits {
  uint32_t max_control_payload = 16u << 20;
  uint32_t max_data_payload = 16u << 20;
};

EncodedHeader encode_header(const FrameHeader& h);
// Before authentication: OK for a header of a handshake type whose length is within
// kMaxHandshakePayload, so that reading its payload allocates at most that; a protocol error
// naming `expected` and what came instead otherwise. Checked before any payload byte is read.
Status check_pre_auth_header(const FrameHeader& h, FrameType expected);

// Decodes and validates a header: marker, known type, zero flags, and `length` within `limits`
// (and within kMaxHandshakePayload for handshake types); for DATA, offset + length <= total.
Status decode_header(std::span<const std::byte, kFrameHeaderBytes> bytes, const FrameLimits& limits,
                     FrameHeader* out);
const char* frame_type_name(FrameType t);

}  // namespace longhaul::net
