// The handshake sequences of handshake.hpp, run over a fresh Connection.
#pragma once

#include <asio/awaitable.hpp>

#include "common/status.hpp"
#include "net/connection.hpp"
#include "net/handshake.hpp"
#include "net/options.hpp"

namespace longhaul::net {

// What the server learned about an admitted client connection.
struct AdmittedConnection {
  Role role = Role::kPeer;
  uint64_t link_id = 0;
  uint16_t connection_index = 0;
  uint16_t connection_count = 1;
};

// Client side: TLS (if configured), HELLO, verify the server's MAC, AUTH, wait for ACCEPT. A
// REJECT from the server becomes a Status with the server's code and reason.
asio::awaitable<Status> client_handshake(Connection& conn, const TransportOptions& options,
                                         uint64_t link_id, uint16_t index, uint16_t count);

// Server side: the mirror image. Every refusal is sent to the client as a REJECT with a reason
// (best effort) and returned as a Status, so the caller can log it and drop the connection.
asio::awaitable<Result<AdmittedConnection>> server_handshake(Connection& conn,
                                                             const TransportOptions& options);

// Server side, for a connection the listener will not serve now (its address is at its cap):
// TLS (if configured) and a REJECT with `why`, so the client learns the reason instead of an end
// of file. Best effort; the caller closes the connection and bounds the time.
asio::awaitable<void> refuse_handshake(Connection& conn, const Status& why);

}  // namespace longhaul::net
