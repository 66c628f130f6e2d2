#include "net/handshake_flow.hpp"

#include <fmt/format.h>

namespace longhaul::net {
namespace {

asio::awaitable<Status> send_message(Connection& conn, FrameType type,
                                     const std::vector<std::byte>& payload) {
  FrameHeader h;
  h.type = type;
  h.length = static_cast<uint32_t>(payload.size());
  co_return co_await conn.write_frame(h, payload);
}

// Reads the next handshake frame, which must be `expected` or a REJECT (turned into an error).
asio::awaitable<Result<std::vector<std::byte>>> receive_message(Connection& conn,
                                                                FrameType expected) {
  auto header = co_await conn.read_header();
  if (!header) co_return header.status();
  // Before authentication only handshake frames are read, and their length is bounded by
  // kMaxHandshakePayload: a header alone must never make this side allocate what it announces
  // (a CONTROL header claiming 16 MiB, repeated over many connections, pinned gigabytes).
  if (Status s = check_pre_auth_header(*header, expected); !s)
    co_return s.with_context(fmt::format("from {}", conn.remote()));
  std::vector<std::byte> payload(header->length);
  Status s = co_await conn.read_payload(payload);
  if (!s) co_return s;
  if (header->type == FrameType::kReject) {
    RejectMessage reject;
    Status d = decode(payload, &reject);
    if (!d) co_return d.with_context(fmt::format("malformed REJECT from {}", conn.remote()));
    co_return Status(reject.code,
                     fmt::format("{} refused the connection: {}", conn.remote(), reject.reason));
  }
  if (header->type != expected)
    co_return protocol_error(fmt::format("expected {} from {}, got {}", frame_type_name(expected),
                                         conn.remote(), frame_type_name(header->type)));
  co_return payload;
}

// Tells the other side why we give up (best effort; it may already be gone).
//
// GCC 12 miscompiles temporaries inside co_await operands (they can be destroyed twice), so in
// this file every awaited call takes named locals only.
asio::awaitable<void> send_reject(Connection& conn, const Status& why) {
  const RejectMessage reject{why.code(), why.message().substr(0, 500)};
  const auto payload = encode(reject);
  (void)co_await send_message(conn, FrameType::kReject, payload);
}

}  // namespace

asio::awaitable<void> refuse_handshake(Connection& conn, const Status& why) {
  Status s = co_await conn.tls_handshake();
  if (!s) co_return;
  co_await send_reject(conn, why);
}

asio::awaitable<Status> client_handshake(Connection& conn, const TransportOptions& options,
                                         uint64_t link_id, uint16_t index, uint16_t count) {
  Status s = co_await conn.tls_handshake();
  if (!s) co_return s;
  HelloMessage hello;
  hello.role = options.role;
  hello.nonce = random_nonce();
  hello.link_id = link_id;
  hello.connection_index = index;
  hello.connection_count = count;
  const auto hello_bytes = encode(hello);
  s = co_await send_message(conn, FrameType::kHello, hello_bytes);
  if (!s) co_return s;

  auto ack_bytes = co_await receive_message(conn, FrameType::kHelloAck);
  if (!ack_bytes) co_return ack_bytes.status();
  HelloAckMessage ack;
  s = decode(*ack_bytes, &ack);
  if (!s) {
    co_await send_reject(conn, s);
    co_return s;
  }
  const bool have_secret = !options.secret.empty();
  if (ack.secret_required != have_secret) {
    const Status why = auth_error(
        have_secret
            ? fmt::format("{} does not use a cluster secret but this side does; refusing an "
                          "unauthenticated server",
                          conn.remote())
            : fmt::format("{} requires a cluster secret and none is configured", conn.remote()));
    co_await send_reject(conn, why);
    co_return why;
  }
  const auto binding = conn.channel_binding();
  AuthMessage auth;
  if (have_secret) {
    if (!mac_equal(ack.mac,
                   compute_mac(options.secret, MacSide::kServer, hello, ack.nonce, binding))) {
      const Status why = auth_error(
          fmt::format("{} failed to prove the cluster secret (wrong secret?)", conn.remote()));
      co_await send_reject(conn, why);
      co_return why;
    }
    auth.mac = compute_mac(options.secret, MacSide::kClient, hello, ack.nonce, binding);
  }
  const auto auth_bytes = encode(auth);
  s = co_await send_message(conn, FrameType::kAuth, auth_bytes);
  if (!s) co_return s;
  auto accepted = co_await receive_message(conn, FrameType::kAccept);
  co_return accepted.status();
}

asio::awaitable<Result<AdmittedConnection>> server_handshake(Connection& conn,
                                                             const TransportOptions& options) {
  Status s = co_await conn.tls_handshake();
  if (!s) co_return s;
  auto hello_bytes = co_await receive_message(conn, FrameType::kHello);
  if (!hello_bytes) {
    const Status why = hello_bytes.status();
    if (why.code() == LH_ERR_PROTOCOL) co_await send_reject(conn, why);
    co_return why;
  }
  HelloMessage hello;
  s = decode(*hello_bytes, &hello);
  if (!s) {
    co_await send_reject(conn, s);
    co_return s;
  }
  if (hello.magic != kHandshakeMagic) {
    const Status why = protocol_error("bad handshake magic: not a longhaul client");
    co_await send_reject(conn, why);
    co_return why;
  }
  if (hello.version != kProtocolVersion) {
    const Status why =
        protocol_error(fmt::format("protocol version mismatch: this side speaks {}, "
                                   "the client {}",
                                   kProtocolVersion, hello.version));
    co_await send_reject(conn, why);
    co_return why;
  }
  if (hello.connection_count == 0 || hello.connection_count > kMaxConnectionsPerLink ||
      hello.connection_index >= hello.connection_count) {
    const Status why = protocol_error(
        fmt::format("invalid connection {} of {}", hello.connection_index, hello.connection_count));
    co_await send_reject(conn, why);
    co_return why;
  }

  const auto binding = conn.channel_binding();
  const bool have_secret = !options.secret.empty();
  HelloAckMessage ack;
  ack.role = options.role;
  ack.secret_required = have_secret;
  ack.nonce = random_nonce();
  if (have_secret)
    ack.mac = compute_mac(options.secret, MacSide::kServer, hello, ack.nonce, binding);
  const auto ack_payload = encode(ack);
  s = co_await send_message(conn, FrameType::kHelloAck, ack_payload);
  if (!s) co_return s;

  auto auth_bytes = co_await receive_message(conn, FrameType::kAuth);
  if (!auth_bytes) co_return auth_bytes.status();
  AuthMessage auth;
  s = decode(*auth_bytes, &auth);
  if (!s) {
    co_await send_reject(conn, s);
    co_return s;
  }
  if (have_secret && !mac_equal(auth.mac, compute_mac(options.secret, MacSide::kClient, hello,
                                                      ack.nonce, binding))) {
    const Status why = auth_error("authentication failed: wrong cluster secret");
    co_await send_reject(conn, why);
    co_return why;
  }
  const std::vector<std::byte> empty;
  s = co_await send_message(conn, FrameType::kAccept, empty);
  if (!s) co_return s;
  co_return AdmittedConnection{hello.role, hello.link_id, hello.connection_index,
                               hello.connection_count};
}

}  // namespace longhaul::net
