// Writes the seed corpus of wire_fuzz: one valid encoding of each thing it decodes, made with the
// real encoders so the seeds follow the codec if it changes. Every control message type has at
// least one seed (control_seeds.cpp); the maker fails when a type has none.
//
//   wire_fuzz_seeds <dir>     (the checked-in corpus is fuzz/corpus/wire)
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "net/frame.hpp"
#include "net/handshake.hpp"
#include "seed_writer.hpp"
#include "wire/codec.hpp"
#include "wire/control_messages.hpp"
#include "wire_fuzz_format.hpp"

namespace {

using longhaul::fuzz::Mode;
using longhaul::fuzz::Op;
using longhaul::fuzz::op_byte;
namespace net = longhaul::net;
namespace wire = longhaul::wire;
namespace fz = longhaul::fuzz;

std::string g_dir;
std::set<size_t> g_control_seeded;  // variant indices of wire::ControlMessage with a seed

}  // namespace

namespace longhaul::fuzz {

void write_seed(const char* name, Mode mode, const std::vector<std::byte>& body) {
  const std::string path = g_dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  const auto m = static_cast<unsigned char>(mode);
  const bool ok = std::fwrite(&m, 1, 1, f) == 1 &&
                  (body.empty() || std::fwrite(body.data(), 1, body.size(), f) == body.size());
  if (std::fclose(f) != 0 || !ok) {
    std::perror(path.c_str());
    std::exit(1);
  }
}

void write_control_seed(const char* name, const wire::ControlMessage& message) {
  g_control_seeded.insert(message.index());
  write_seed(name, kControl, wire::encode_control(message));
}

}  // namespace longhaul::fuzz

namespace {

using longhaul::fuzz::write_seed;

std::vector<std::byte> cat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::byte> header_bytes(const net::FrameHeader& h) {
  const net::EncodedHeader e = net::encode_header(h);
  return {e.begin(), e.end()};
}

net::Nonce pattern(uint8_t start) {
  net::Nonce n;
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<std::byte>(start + i);
  return n;
}

void reader_program() {
  const std::vector<uint8_t> prog = {
      op_byte(fz::kOpU8),        op_byte(fz::kOpU16),        op_byte(fz::kOpU32),
      op_byte(fz::kOpU64),       op_byte(fz::kOpI64),        op_byte(fz::kOpF64),
      op_byte(fz::kOpBool),      op_byte(fz::kOpRaw, 2),     op_byte(fz::kOpBytes, 15),
      op_byte(fz::kOpString, 7), op_byte(fz::kOpCount, 0x5), op_byte(fz::kOpU32),
      op_byte(fz::kOpU32),       op_byte(fz::kOpEnd),
  };
  wire::Writer w;
  w.u8(static_cast<uint8_t>(prog.size()));
  for (uint8_t p : prog) w.u8(p);
  w.u8(0xab);
  w.u16(0xbeef);
  w.u32(0xdeadbeef);
  w.u64(0x0123456789abcdefULL);
  w.i64(-42);
  w.f64(3.25);
  w.boolean(true);
  const std::byte raw[8] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},
                            std::byte{5}, std::byte{6}, std::byte{7}, std::byte{8}};
  w.raw(raw);
  w.bytes(std::span(raw, 3));
  w.string("longhaul");
  w.u32(2);  // count of two u32 elements (min element 4 bytes)
  w.u32(7);
  w.u32(9);
  write_seed("reader_program", fz::kReaderProgram, w.take());
}

// The handshake messages every seed below is made of.
struct Handshake {
  net::HelloMessage hello;
  net::HelloAckMessage ack;
  net::AuthMessage auth;
  net::RejectMessage reject;
};

Handshake handshake_messages() {
  Handshake h;
  h.hello.role = net::Role::kPeer;
  h.hello.nonce = pattern(1);
  h.hello.link_id = 0x0102030405060708ULL;
  h.hello.connection_index = 2;
  h.hello.connection_count = 4;
  h.ack.role = net::Role::kMaster;
  h.ack.secret_required = true;
  h.ack.nonce = pattern(0x40);
  h.ack.mac = pattern(0x80);
  h.auth.mac = pattern(0xc0);
  h.reject.code = LH_ERR_AUTH;
  h.reject.reason = "wrong cluster secret";
  return h;
}

// Frame headers: one per payload rule (handshake, control, data, empty-only), and one carrying
// explicit limits.
void header_seeds() {
  write_seed("header_hello", fz::kFrameHeader,
             header_bytes({net::FrameType::kHello, 0, 55, 0, 0, 0}));
  write_seed("header_control", fz::kFrameHeader,
             header_bytes({net::FrameType::kControl, 0, 4096, 0, 0, 0}));
  write_seed("header_data", fz::kFrameHeader,
             header_bytes({net::FrameType::kData, 0, 1024, 0x1122334455667788ULL, 4096, 8192}));
  write_seed("header_ping", fz::kFrameHeader,
             header_bytes({net::FrameType::kPing, 0, 0, 99, 0, 0}));
  write_seed("header_cancel_with_reason", fz::kFrameHeader,
             header_bytes({net::FrameType::kCancel, 0, net::kMaxCancelReason, 99, ~0xFFFFull, 0}));
  {
    wire::Writer limits;
    limits.u32(100);  // max_control_payload
    limits.u32(200);  // max_data_payload
    write_seed("header_data_limits", fz::kFrameHeader,
               cat(header_bytes({net::FrameType::kData, 0, 200, 1, 0, 200}), limits.take()));
  }
}

void handshake_seeds(const Handshake& h) {
  write_seed("hello", fz::kHello, net::encode(h.hello));
  {
    net::HelloMessage other = h.hello;
    other.version = net::kProtocolVersion + 1;  // another version: only magic and version are read
    auto bytes = net::encode(other);
    bytes.resize(10);
    write_seed("hello_other_version", fz::kHello, bytes);
  }

  write_seed("hello_ack", fz::kHelloAck, net::encode(h.ack));

  write_seed("auth", fz::kAuth, net::encode(h.auth));

  write_seed("reject", fz::kReject, net::encode(h.reject));
  {
    net::RejectMessage longest;  // a reason at the 512-byte limit
    longest.code = LH_ERR_INTERNAL;
    longest.reason.assign(512, 'x');
    write_seed("reject_longest_reason", fz::kReject, net::encode(longest));
  }
}

// Just past each limit: the decoders must refuse these (the fuzzer's model checks that they do),
// so replaying the corpus pins every boundary even where random mutation rarely lands exactly.
void bad_seeds(const Handshake& h) {
  net::RejectMessage too_long;
  too_long.code = LH_ERR_PROTOCOL;
  too_long.reason.assign(513, 'x');
  write_seed("bad_reject_reason_513", fz::kReject, net::encode(too_long));
  auto zero_code = net::encode(h.reject);
  zero_code[0] = std::byte{0};  // LH_OK is not a reason to reject
  write_seed("bad_reject_code_ok", fz::kReject, zero_code);
  auto trailing = net::encode(h.hello);
  trailing.push_back(std::byte{0});
  write_seed("bad_hello_trailing_byte", fz::kHello, trailing);
  auto short_ack = net::encode(h.ack);
  short_ack.pop_back();
  write_seed("bad_hello_ack_short", fz::kHelloAck, short_ack);
  auto bad_bool = net::encode(h.ack);
  bad_bool[3] = std::byte{2};  // secret_required must be 0 or 1
  write_seed("bad_hello_ack_bool", fz::kHelloAck, bad_bool);
  write_seed("bad_header_hello_1025", fz::kFrameHeader,
             header_bytes({net::FrameType::kHello, 0, net::kMaxHandshakePayload + 1, 0, 0, 0}));
  write_seed("bad_header_data_past_total", fz::kFrameHeader,
             header_bytes({net::FrameType::kData, 0, 101, 1, 0, 100}));
  // offset + length wraps around 2^64 to land inside total: only exact arithmetic refuses it.
  write_seed("bad_header_data_wrapping", fz::kFrameHeader,
             header_bytes({net::FrameType::kData, 0, 16, 1, UINT64_MAX - 7, 100}));
  write_seed("bad_header_ping_payload", fz::kFrameHeader,
             header_bytes({net::FrameType::kPing, 0, 1, 1, 0, 0}));
  write_seed("bad_header_cancel_reason_1025", fz::kFrameHeader,
             header_bytes({net::FrameType::kCancel, 0, net::kMaxCancelReason + 1, 1, 0, 0}));
}

// Whole frames as a connection reads them, and as the handshake reads them before
// authentication ([expected type][frame]).
void frame_seeds(const Handshake& h) {
  const auto hello_payload = net::encode(h.hello);
  write_seed("frame_hello", fz::kFrameStream,
             cat(header_bytes({net::FrameType::kHello, 0,
                               static_cast<uint32_t>(hello_payload.size()), 0, 0, 0}),
                 hello_payload));
  const auto reject_payload = net::encode(h.reject);
  write_seed("frame_reject", fz::kFrameStream,
             cat(header_bytes({net::FrameType::kReject, 0,
                               static_cast<uint32_t>(reject_payload.size()), 0, 0, 0}),
                 reject_payload));
  // Frames as the handshake reads them before authentication ([expected type][frame]): a HELLO,
  // and the 16 MiB CONTROL header that once made the receiver allocate 16 MiB (issue 24).
  const auto expect = [](net::FrameType t) {
    return std::vector<std::byte>{static_cast<std::byte>(t)};
  };
  write_seed("pre_auth_hello", fz::kPreAuthStream,
             cat(expect(net::FrameType::kHello),
                 cat(header_bytes({net::FrameType::kHello, 0,
                                   static_cast<uint32_t>(hello_payload.size()), 0, 0, 0}),
                     hello_payload)));
  write_seed("pre_auth_control_16mib", fz::kPreAuthStream,
             cat(expect(net::FrameType::kHello),
                 header_bytes({net::FrameType::kControl, 0, 16u << 20, 0, 0, 0})));
  write_seed(
      "pre_auth_data_before_auth", fz::kPreAuthStream,
      cat(expect(net::FrameType::kAuth), header_bytes({net::FrameType::kData, 0, 0, 0, 0, 0})));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus-dir>\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  const Handshake h = handshake_messages();
  reader_program();
  header_seeds();
  handshake_seeds(h);
  bad_seeds(h);
  frame_seeds(h);
  fz::control_seeds();
  // A new control message without a seed fails here, so the corpus follows the protocol.
  for (size_t i = 0; i < std::variant_size_v<wire::ControlMessage>; ++i)
    if (!g_control_seeded.contains(i)) {
      std::fprintf(stderr,
                   "no seed for control message type %zu: add one to fuzz/control_seeds.cpp\n",
                   i + 1);
      return 1;
    }
  return 0;
}
