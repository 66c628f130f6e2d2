#include "net/frame.hpp"

#include <fmt/format.h>

#include "wire/codec.hpp"

namespace longhaul::net {

EncodedHeader encode_header(const FrameHeader& h) {
  wire::Writer w;
  w.u16(kFrameMarker);
  w.u8(static_cast<uint8_t>(h.type));
  w.u8(h.flags);
  w.u32(h.length);
  w.u64(h.op_id);
  w.u64(h.offset);
  w.u64(h.total);
  EncodedHeader out;
  std::copy(w.buffer().begin(), w.buffer().end(), out.begin());
  return out;
}

const char* frame_type_name(FrameType t) {
  switch (t) {
    case FrameType::kHello:
      return "HELLO";
    case FrameType::kHelloAck:
      return "HELLO_ACK";
    case FrameType::kAuth:
      return "AUTH";
    case FrameType::kAccept:
      return "ACCEPT";
    case FrameType::kReject:
      return "REJECT";
    case FrameType::kData:
      return "DATA";
    case FrameType::kControl:
      return "CONTROL";
    case FrameType::kPing:
      return "PING";
    case FrameType::kPong:
      return "PONG";
    case FrameType::kCancel:
      return "CANCEL";
  }
  return "UNKNOWN";
}

bool is_handshake(FrameType t) {
  return t == FrameType::kHello || t == FrameType::kHelloAck || t == FrameType::kAuth ||
         t == FrameType::kAccept || t == FrameType::kReject;
}

Status check_pre_auth_header(const FrameHeader& h, FrameType expected) {
  if (is_handshake(h.type) && h.length <= kMaxHandshakePayload) return Status::ok();
  return protocol_error(fmt::format("expected {} before authentication, got a {} frame of {} bytes",
                                    frame_type_name(expected), frame_type_name(h.type), h.length));
}

Status decode_header(std::span<const std::byte, kFrameHeaderBytes> bytes, const FrameLimits& limits,
                     FrameHeader* out) {
  wire::Reader r(bytes);
  uint16_t marker;
  uint8_t type;
  FrameHeader h;
  LH_RETURN_IF_ERROR(r.u16(&marker));
  LH_RETURN_IF_ERROR(r.u8(&type));
  LH_RETURN_IF_ERROR(r.u8(&h.flags));
  LH_RETURN_IF_ERROR(r.u32(&h.length));
  LH_RETURN_IF_ERROR(r.u64(&h.op_id));
  LH_RETURN_IF_ERROR(r.u64(&h.offset));
  LH_RETURN_IF_ERROR(r.u64(&h.total));
  if (marker != kFrameMarker)
    return protocol_error(fmt::format("bad frame marker 0x{:04x}: not a longhaul stream", marker));
  if (type < static_cast<uint8_t>(FrameType::kHello) ||
      type > static_cast<uint8_t>(FrameType::kCancel))
    return protocol_error(fmt::format("unknown frame type {}", type));
  h.type = static_cast<FrameType>(type);
  if (h.flags != 0)
    return protocol_error(
        fmt::format("{} frame with unknown flags 0x{:02x}", frame_type_name(h.type), h.flags));
  uint32_t max = limits.max_control_payload;
  if (is_handshake(h.type)) max = kMaxHandshakePayload;
  if (h.type == FrameType::kData) max = limits.max_data_payload;
  if (h.type == FrameType::kPing || h.type == FrameType::kPong) max = 0;
  if (h.type == FrameType::kCancel) max = kMaxCancelReason;
  if (h.length > max)
    return protocol_error(fmt::format("{} frame of {} bytes exceeds the limit of {}",
                                      frame_type_name(h.type), h.length, max));
  if (h.type == FrameType::kData && (h.offset > h.total || h.length > h.total - h.offset))
    return protocol_error(fmt::format("DATA segment [{}, +{}) outside its operation of {} bytes",
                                      h.offset, h.length, h.total));
  *out = h;
  return Status::ok();
}

}  // namespace longhaul::net
