#include "net/handshake_flow.hpp"

#include <fmt/format.h>

namespace longhaul::net {
namespace {

asio::awaitable<Status> send_message(Connection& conn, FrameType type, const std::vector<std::byte>& payload) {
  FrameHeader h;
  h.type = type;
  h.length = static_cast<uint32_t>(payload.size());
  co_return co_await conn.write_frame(h, payload);
}

// Reads the next handshake frame, which must be `expected` or a REJECT (turned into an error).
asio::awaitable<Result<std::vector<std::byte>>> receive_message(Connection& conn, FrameType expected) {
  auto header = co_await conn.read_header();
  if (!header) co_return header.status();
  std::vector<std::byte> payload(header->length);  // bounded by kMaxHandshakePayload
  Status s = co_await conn.read_payload(payload);
  if (!s) co_return s;
  if (header->type == FrameType::kReject) {
    RejectMessage reject;
    Status d = decode(payload, &reject);
    if (!d) co_return d.with_context(fmt::format("malformed REJECT from {}", conn.remote()));
    co_return Status(reject.code, fmt::format("{} refused the connection: {}", conn.remote(), reject.reason));
  }
  if (header->type != expected)
    co_return protocol_error(fmt::format("expected {} from {}, got {}", frame_type_name(expected),
                                         conn.remote(), frame_type_name(header->type)));
  co_return payload;
}

// Tells the other side why we give up (best effort; it may already be gone) and returns `why`.
asio::awaitable<Status> refuse(Connection& conn, Status why) {
  RejectMessage reject{why.code(), why.message().substr(0, 500)};
  (void)co_await send_message(conn, FrameType::kReject, encode(reject));
  co_return why;
}

}  // namespace

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
  s = co_await send_message(conn, FrameType::kHello, encode(hello));
  if (!s) co_return s;

  auto ack_bytes = co_await receive_message(conn, FrameType::kHelloAck);
  if (!ack_bytes) co_return ack_bytes.status();
  HelloAckMessage ack;
  s = decode(*ack_bytes, &ack);
  if (!s) co_return co_await refuse(conn, s);
  const bool have_secret = !options.secret.empty();
  if (ack.secret_required != have_secret) {
    co_return co_await refuse(
        conn, auth_error(have_secret ? fmt::format("{} does not use a cluster secret but this side does; "
                                                   "refusing an unauthenticated server", conn.remote())
                                     : fmt::format("{} requires a cluster secret and none is configured",
                                                   conn.remote())));
  }
  const auto binding = conn.channel_binding();
  AuthMessage auth;
  if (have_secret) {
    if (!mac_equal(ack.mac, compute_mac(options.secret, MacSide::kServer, hello, ack.nonce, binding)))
      co_return co_await refuse(conn, auth_error(fmt::format(
                                          "{} failed to prove the cluster secret (wrong secret?)", conn.remote())));
    auth.mac = compute_mac(options.secret, MacSide::kClient, hello, ack.nonce, binding);
  }
  s = co_await send_message(conn, FrameType::kAuth, encode(auth));
  if (!s) co_return s;
  auto accepted = co_await receive_message(conn, FrameType::kAccept);
  co_return accepted.status();
}

asio::awaitable<Result<AdmittedConnection>> server_handshake(Connection& conn, const TransportOptions& options) {
  Status s = co_await conn.tls_handshake();
  if (!s) co_return s;
  auto hello_bytes = co_await receive_message(conn, FrameType::kHello);
  if (!hello_bytes) {
    if (hello_bytes.status().code() == LH_ERR_PROTOCOL) co_return co_await refuse(conn, hello_bytes.status());
    co_return hello_bytes.status();
  }
  HelloMessage hello;
  s = decode(*hello_bytes, &hello);
  if (!s) co_return co_await refuse(conn, s);
  if (hello.magic != kHandshakeMagic)
    co_return co_await refuse(conn, protocol_error("bad handshake magic: not a longhaul client"));
  if (hello.version != kProtocolVersion)
    co_return co_await refuse(conn, protocol_error(fmt::format("protocol version mismatch: this side speaks {}, "
                                                               "the client {}", kProtocolVersion, hello.version)));
  if (hello.connection_count == 0 || hello.connection_count > kMaxConnectionsPerLink ||
      hello.connection_index >= hello.connection_count)
    co_return co_await refuse(conn, protocol_error(fmt::format("invalid connection {} of {}", hello.connection_index,
                                                               hello.connection_count)));

  const auto binding = conn.channel_binding();
  const bool have_secret = !options.secret.empty();
  HelloAckMessage ack;
  ack.role = options.role;
  ack.secret_required = have_secret;
  ack.nonce = random_nonce();
  if (have_secret) ack.mac = compute_mac(options.secret, MacSide::kServer, hello, ack.nonce, binding);
  s = co_await send_message(conn, FrameType::kHelloAck, encode(ack));
  if (!s) co_return s;

  auto auth_bytes = co_await receive_message(conn, FrameType::kAuth);
  if (!auth_bytes) co_return auth_bytes.status();
  AuthMessage auth;
  s = decode(*auth_bytes, &auth);
  if (!s) co_return co_await refuse(conn, s);
  if (have_secret &&
      !mac_equal(auth.mac, compute_mac(options.secret, MacSide::kClient, hello, ack.nonce, binding)))
    co_return co_await refuse(conn, auth_error("authentication failed: wrong cluster secret"));
  s = co_await send_message(conn, FrameType::kAccept, {});
  if (!s) co_return s;
  co_return AdmittedConnection{hello.role, hello.link_id, hello.connection_index, hello.connection_count};
}

}  // namespace longhaul::net
