// libFuzzer target for the wire codec (wire::Reader / Writer), the frame header decoder, the
// handshake message decoders and the control-message decoder. The input format is in
// wire_fuzz_format.hpp.
//
// Every decode is checked two ways, and any disagreement traps (so a finding is always real):
//   - against an independent model of what the bytes mean (accept/reject, and the values), and
//   - by re-encoding what was decoded: the encoder must give back exactly the bytes consumed.
// Every rejection must be LH_ERR_PROTOCOL with a message. Allocation is bounded by running under
// -malloc_limit_mb/-rss_limit_mb: a decoder that believed a length field would trip them.
//
// The same file is compiled without libFuzzer into tests/unit/fuzz_replay (wire_fuzz_replay),
// which replays the checked-in corpus in the normal build.
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "net/frame.hpp"
#include "net/handshake.hpp"
#include "wire/codec.hpp"
#include "wire/control_messages.hpp"
#include "wire_fuzz_format.hpp"

namespace longhaul::fuzz {
namespace {

using Bytes = std::span<const std::byte>;

[[noreturn]] void fail(const char* what, int line) {
  std::fprintf(stderr, "wire_fuzz: check failed at wire_fuzz.cpp:%d: %s\n", line, what);
  std::fflush(stderr);
  __builtin_trap();
}

#define FUZZ_CHECK(cond)                \
  do {                                  \
    if (!(cond)) fail(#cond, __LINE__); \
  } while (0)

// A rejection must be a protocol error that says something.
void check_rejection(const Status& s) {
  FUZZ_CHECK(s.code() == LH_ERR_PROTOCOL);
  FUZZ_CHECK(!s.message().empty());
}

bool same_bytes(Bytes a, Bytes b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// Little-endian read for the model; the caller has checked the bounds.
uint64_t le(Bytes in, size_t pos, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i)
    v |= static_cast<uint64_t>(std::to_integer<uint8_t>(in[pos + i])) << (8 * i);
  return v;
}

// ---- Reader programs ---------------------------------------------------------------------------

void run_reader_program(Bytes in) {
  if (in.empty()) return;
  const size_t prog_len = std::min<size_t>(std::to_integer<uint8_t>(in[0]), in.size() - 1);
  const Bytes prog = in.subspan(1, prog_len);
  const Bytes stream = in.subspan(1 + prog_len);

  wire::Reader r(stream);
  wire::Writer w;
  size_t pos = 0;  // the model's position
  for (std::byte pb : prog) {
    const uint8_t p = std::to_integer<uint8_t>(pb);
    const auto op = static_cast<Op>((p & 0x0f) % kOpKinds);
    const uint8_t arg = static_cast<uint8_t>(p >> 4);
    FUZZ_CHECK(r.remaining() == stream.size() - pos);
    const size_t rem = stream.size() - pos;
    bool ok = false;
    switch (op) {
      case kOpU8: {
        uint8_t v = 0;
        Status s = r.u8(&v);
        ok = s.is_ok();
        FUZZ_CHECK(ok == (rem >= 1));
        if (ok) {
          FUZZ_CHECK(v == le(stream, pos, 1));
          w.u8(v);
          pos += 1;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpU16: {
        uint16_t v = 0;
        Status s = r.u16(&v);
        ok = s.is_ok();
        FUZZ_CHECK(ok == (rem >= 2));
        if (ok) {
          FUZZ_CHECK(v == le(stream, pos, 2));
          w.u16(v);
          pos += 2;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpU32: {
        uint32_t v = 0;
        Status s = r.u32(&v);
        ok = s.is_ok();
        FUZZ_CHECK(ok == (rem >= 4));
        if (ok) {
          FUZZ_CHECK(v == le(stream, pos, 4));
          w.u32(v);
          pos += 4;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpU64: {
        uint64_t v = 0;
        Status s = r.u64(&v);
        ok = s.is_ok();
        FUZZ_CHECK(ok == (rem >= 8));
        if (ok) {
          FUZZ_CHECK(v == le(stream, pos, 8));
          w.u64(v);
          pos += 8;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpI64: {
        int64_t v = 0;
        Status s = r.i64(&v);
        ok = s.is_ok();
        FUZZ_CHECK(ok == (rem >= 8));
        if (ok) {
          FUZZ_CHECK(static_cast<uint64_t>(v) == le(stream, pos, 8));
          w.i64(v);
          pos += 8;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpF64: {
        double v = 0;
        Status s = r.f64(&v);
        ok = s.is_ok();
        FUZZ_CHECK(ok == (rem >= 8));
        if (ok) {
          FUZZ_CHECK(std::bit_cast<uint64_t>(v) == le(stream, pos, 8));  // NaN payloads included
          w.f64(v);
          pos += 8;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpBool: {
        bool v = false;
        Status s = r.boolean(&v);
        ok = s.is_ok();
        FUZZ_CHECK(ok == (rem >= 1 && le(stream, pos, 1) <= 1));
        if (ok) {
          FUZZ_CHECK(v == (le(stream, pos, 1) == 1));
          w.boolean(v);
          pos += 1;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpRaw: {
        std::array<std::byte, 60> buf{};
        const size_t n = static_cast<size_t>(arg) * 4;
        Status s = r.raw(std::span(buf.data(), n));
        ok = s.is_ok();
        FUZZ_CHECK(ok == (rem >= n));
        if (ok) {
          FUZZ_CHECK(same_bytes(std::span(buf.data(), n), stream.subspan(pos, n)));
          w.raw(std::span(buf.data(), n));
          pos += n;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpBytes:
      case kOpString: {
        const uint32_t max_len = kLimits[arg];
        std::vector<std::byte> v;
        std::string str;
        Status s = op == kOpBytes ? r.bytes(&v, max_len) : r.string(&str, max_len);
        ok = s.is_ok();
        const bool model_ok =
            rem >= 4 && le(stream, pos, 4) <= max_len && le(stream, pos, 4) <= rem - 4;
        FUZZ_CHECK(ok == model_ok);
        if (ok) {
          const size_t n = static_cast<size_t>(le(stream, pos, 4));
          const Bytes got =
              op == kOpBytes ? Bytes(v) : std::as_bytes(std::span(str.data(), str.size()));
          FUZZ_CHECK(same_bytes(got, stream.subspan(pos + 4, n)));
          if (op == kOpBytes)
            w.bytes(v);
          else
            w.string(str);
          pos += 4 + n;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpCount: {
        const size_t min_element = kMinElement[arg & 3];
        const uint32_t max_count = kLimits[(arg >> 2) * 4 + 3];
        uint32_t n = 0;
        Status s = r.count(&n, min_element, max_count);
        ok = s.is_ok();
        bool model_ok = rem >= 4 && le(stream, pos, 4) <= max_count;
        if (model_ok && min_element > 0) model_ok = le(stream, pos, 4) * min_element <= rem - 4;
        FUZZ_CHECK(ok == model_ok);
        if (ok) {
          FUZZ_CHECK(n == le(stream, pos, 4));
          if (min_element > 0) {
            // What a caller does next: reserve the elements. Safe only because count() checked.
            std::vector<std::byte> elements;
            elements.reserve(static_cast<size_t>(n) * min_element);
          }
          w.u32(n);
          pos += 4;
        } else {
          check_rejection(s);
        }
        break;
      }
      case kOpEnd: {
        Status s = r.expect_end();
        FUZZ_CHECK(s.is_ok() == (rem == 0));
        if (!s.is_ok()) check_rejection(s);
        FUZZ_CHECK(r.remaining() == rem);
        ok = true;  // a failed expect_end consumes nothing, so the program goes on
        break;
      }
      case kOpKinds:
        fail("unreachable op", __LINE__);
    }
    if (!ok) break;  // after a failure a Reader's position is unspecified; callers stop too
    FUZZ_CHECK(w.buffer().size() == pos);
  }
  // Round trip: the Writer, fed the decoded values, reproduces exactly the bytes consumed.
  FUZZ_CHECK(same_bytes(w.buffer(), stream.first(pos)));
}

// ---- Frame headers -----------------------------------------------------------------------------

bool is_handshake_type(uint8_t t) {
  return t >= 1 && t <= 5;
}

Status check_frame_header(std::span<const std::byte, net::kFrameHeaderBytes> bytes,
                          const net::FrameLimits& limits, net::FrameHeader* out) {
  net::FrameHeader h;
  Status s = net::decode_header(bytes, limits, &h);
  // The model of a valid header.
  const Bytes b(bytes);
  const uint64_t marker = le(b, 0, 2), type = le(b, 2, 1), flags = le(b, 3, 1),
                 length = le(b, 4, 4);
  const uint64_t offset = le(b, 16, 8), total = le(b, 24, 8);
  bool model_ok = marker == net::kFrameMarker && type >= 1 && type <= 10 && flags == 0;
  if (model_ok) {
    uint64_t max = limits.max_control_payload;
    if (is_handshake_type(static_cast<uint8_t>(type))) max = net::kMaxHandshakePayload;
    if (type == static_cast<uint8_t>(net::FrameType::kData)) max = limits.max_data_payload;
    if (type == static_cast<uint8_t>(net::FrameType::kPing) ||
        type == static_cast<uint8_t>(net::FrameType::kPong))
      max = 0;
    if (type == static_cast<uint8_t>(net::FrameType::kCancel))
      max = net::kMaxCancelReason;  // a mismatch's reason (protocol version 14)
    model_ok = length <= max;
    // offset + length <= total, in exact (unbounded) arithmetic.
    if (model_ok && type == static_cast<uint8_t>(net::FrameType::kData))
      model_ok = offset <= total && length <= total - offset;
  }
  FUZZ_CHECK(s.is_ok() == model_ok);
  if (!s.is_ok()) {
    check_rejection(s);
    return s;
  }
  FUZZ_CHECK(static_cast<uint64_t>(h.type) == type && h.flags == 0 && h.length == length);
  FUZZ_CHECK(h.op_id == le(b, 8, 8) && h.offset == offset && h.total == total);
  FUZZ_CHECK(std::strcmp(net::frame_type_name(h.type), "UNKNOWN") != 0);
  const net::EncodedHeader again = net::encode_header(h);
  FUZZ_CHECK(same_bytes(again, b));
  *out = h;
  return s;
}

void run_frame_header(Bytes in) {
  if (in.size() < net::kFrameHeaderBytes) return;
  net::FrameLimits limits;
  if (in.size() >= net::kFrameHeaderBytes + 8) {
    limits.max_control_payload = static_cast<uint32_t>(le(in, 32, 4));
    limits.max_data_payload = static_cast<uint32_t>(le(in, 36, 4));
  }
  net::FrameHeader h;
  (void)check_frame_header(in.first<net::kFrameHeaderBytes>(), limits, &h);
}

// ---- Handshake messages ------------------------------------------------------------------------

constexpr size_t kHelloBytes = 8 + 2 + 1 + net::kNonceBytes + 8 + 2 + 2;
constexpr size_t kHelloAckBytes = 2 + 1 + 1 + net::kNonceBytes + net::kMacBytes;
constexpr size_t kRejectReasonMax = 512;

bool valid_role(uint64_t v) {
  return v >= 1 && v <= 3;
}

void check_hello(Bytes in) {
  net::HelloMessage m;
  Status s = net::decode(in, &m);
  bool model_ok = in.size() >= 10;
  const bool ours =
      model_ok && le(in, 0, 8) == net::kHandshakeMagic && le(in, 8, 2) == net::kProtocolVersion;
  // Not our magic or version: only those two fields are read, so the handshake can say which.
  if (ours) model_ok = in.size() == kHelloBytes && valid_role(le(in, 10, 1));
  FUZZ_CHECK(s.is_ok() == model_ok);
  if (!s.is_ok()) return check_rejection(s);
  FUZZ_CHECK(m.magic == le(in, 0, 8) && m.version == le(in, 8, 2));
  const std::vector<std::byte> again = net::encode(m);
  FUZZ_CHECK(again.size() == kHelloBytes);
  if (ours)
    FUZZ_CHECK(same_bytes(again, in));
  else
    FUZZ_CHECK(same_bytes(Bytes(again).first(10), in.first(10)));
}

void check_hello_ack(Bytes in) {
  net::HelloAckMessage m;
  Status s = net::decode(in, &m);
  const bool model_ok =
      in.size() == kHelloAckBytes && valid_role(le(in, 2, 1)) && le(in, 3, 1) <= 1;
  FUZZ_CHECK(s.is_ok() == model_ok);
  if (!s.is_ok()) return check_rejection(s);
  FUZZ_CHECK(same_bytes(net::encode(m), in));
}

void check_auth(Bytes in) {
  net::AuthMessage m;
  Status s = net::decode(in, &m);
  FUZZ_CHECK(s.is_ok() == (in.size() == net::kMacBytes));
  if (!s.is_ok()) return check_rejection(s);
  FUZZ_CHECK(same_bytes(net::encode(m), in));
}

void check_reject(Bytes in) {
  net::RejectMessage m;
  Status s = net::decode(in, &m);
  bool model_ok = in.size() >= 8;
  if (model_ok) {
    const uint64_t code = le(in, 0, 4), n = le(in, 4, 4);
    model_ok = code >= 1 && code <= LH_ERR_INTERNAL && n <= kRejectReasonMax && in.size() == 8 + n;
  }
  FUZZ_CHECK(s.is_ok() == model_ok);
  if (!s.is_ok()) return check_rejection(s);
  FUZZ_CHECK(m.reason.size() <= kRejectReasonMax);
  FUZZ_CHECK(same_bytes(net::encode(m), in));
}

// ---- Control messages -------------------------------------------------------------------------

// No model of every message here (control_messages_test.cpp checks the schema's rules); what must
// hold for any input: no crash, no unbounded allocation, a rejection is a protocol error, and an
// accepted message re-encodes to exactly the input.
void check_control(Bytes in) {
  auto m = wire::decode_control(in);
  if (!m) return check_rejection(m.status());
  FUZZ_CHECK(same_bytes(wire::encode_control(*m), in));
}

// ---- A frame as a connection reads it ----------------------------------------------------------

// A handshake frame's payload, with its type's decoder (other types carry none to check here).
void check_frame_payload(net::FrameType type, Bytes payload) {
  switch (type) {
    case net::FrameType::kHello:
      return check_hello(payload);
    case net::FrameType::kHelloAck:
      return check_hello_ack(payload);
    case net::FrameType::kAuth:
      return check_auth(payload);
    case net::FrameType::kReject:
      return check_reject(payload);
    default:
      return;
  }
}

void run_frame_stream(Bytes in) {
  if (in.size() < net::kFrameHeaderBytes) return;
  net::FrameHeader h;
  if (!check_frame_header(in.first<net::kFrameHeaderBytes>(), net::FrameLimits{}, &h).is_ok())
    return;
  const Bytes rest = in.subspan(net::kFrameHeaderBytes);
  if (rest.size() < h.length) return;  // the connection would wait for more bytes
  check_frame_payload(h.type, rest.first(h.length));
}

// ---- A frame before authentication -------------------------------------------------------------

void run_pre_auth_stream(Bytes in) {
  if (in.size() < 1 + net::kFrameHeaderBytes) return;
  const auto expected = static_cast<net::FrameType>(std::to_integer<uint8_t>(in[0]));
  net::FrameHeader h;
  if (!check_frame_header(in.subspan(1).first<net::kFrameHeaderBytes>(), net::FrameLimits{}, &h)
           .is_ok())
    return;
  const Status s = net::check_pre_auth_header(h, expected);
  // The model: a handshake frame of at most kMaxHandshakePayload bytes, nothing else.
  const bool handshake = h.type == net::FrameType::kHello || h.type == net::FrameType::kHelloAck ||
                         h.type == net::FrameType::kAuth || h.type == net::FrameType::kAccept ||
                         h.type == net::FrameType::kReject;
  FUZZ_CHECK(s.is_ok() == (handshake && h.length <= net::kMaxHandshakePayload));
  if (!s.is_ok()) return check_rejection(s);
  // What the handshake allocates for the payload: the header's length, now known to be small.
  FUZZ_CHECK(h.length <= net::kMaxHandshakePayload);
  const Bytes rest = in.subspan(1 + net::kFrameHeaderBytes);
  if (rest.size() < h.length) return;
  check_frame_payload(h.type, rest.first(h.length));
}

}  // namespace

int fuzz_one(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Bytes in = std::as_bytes(std::span(data, size)).subspan(1);
  switch (static_cast<Mode>(data[0] % kModeCount)) {
    case kReaderProgram:
      run_reader_program(in);
      break;
    case kFrameHeader:
      run_frame_header(in);
      break;
    case kHello:
      check_hello(in);
      break;
    case kHelloAck:
      check_hello_ack(in);
      break;
    case kAuth:
      check_auth(in);
      break;
    case kReject:
      check_reject(in);
      break;
    case kFrameStream:
      run_frame_stream(in);
      break;
    case kControl:
      check_control(in);
      break;
    case kPreAuthStream:
      run_pre_auth_stream(in);
      break;
    case kModeCount:
      break;
  }
  return 0;
}

}  // namespace longhaul::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return longhaul::fuzz::fuzz_one(data, size);
}
