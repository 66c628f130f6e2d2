// Transport options: plain structs with documented defaults.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "net/frame.hpp"
#include "net/handshake.hpp"

namespace longhaul::net {

struct TlsOptions {
  bool enabled = false;
  // PEM files. A listener needs cert_file and key_file. A connector verifies the server's
  // certificate against ca_file when one is given; without it the channel is encrypted and the
  // cluster secret (bound to the TLS channel) authenticates both ends.
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
};

struct SocketOptions {
  // 0 leaves the kernel's buffer autotuning on, which is best unless a path's bandwidth-delay
  // product exceeds the autotuning ceiling (net.ipv4.tcp_rmem/wmem max).
  int send_buffer_bytes = 0;
  int receive_buffer_bytes = 0;
  // Keepalive probes after this much idle time, every interval, dead after `count` misses.
  std::chrono::seconds keepalive_idle{5};
  std::chrono::seconds keepalive_interval{1};
  int keepalive_count = 3;
  // TCP_USER_TIMEOUT: unacknowledged data older than this kills the connection (a silently
  // dead path is found in seconds instead of the kernel's default of ~15 minutes).
  std::chrono::milliseconds user_timeout{10000};
  // TCP congestion control of every connection (TCP_CONGESTION). "auto": BBR where the kernel
  // lets this process pick it, else the system's default (logged once); "system": the system's
  // default; any other name: that algorithm, or the connection fails with its error. Why BBR by
  // default: after one RTO of silence Linux shrinks a loss-based algorithm's window back towards
  // its initial 10 segments (net.ipv4.tcp_slow_start_after_idle), so a DiLoCo sync after seconds
  // of compute would climb out of slow start on every path; the kernel leaves BBR's model alone.
  std::string congestion_control = "auto";
};

struct TransportOptions {
  Role role = Role::kPeer;
  // Cluster secret; empty disables authentication. Both ends must agree.
  std::string secret;
  TlsOptions tls;
  SocketOptions socket;
  FrameLimits limits;
  // Upload cap of one link in bytes per second, split evenly over its connections (each paced at
  // rate / K by the kernel); 0: none. For a peer whose uplink is slower than the path (a home
  // connection): without it K connections fill the uplink's buffer and delay everything else
  // that leaves the machine, the peer's own heartbeats included.
  uint64_t link_rate_bytes_per_s = 0;
  // Payloads are striped in segments of this size across a link's connections.
  uint32_t segment_bytes = 1u << 20;
  // A connection that has not completed its handshake (or a link missing some of its
  // connections) after this long is dropped.
  std::chrono::milliseconds handshake_timeout{5000};
  // Accepted connections still in their handshake (no secret proven yet): at most this many in
  // all (beyond it the oldest is dropped to make room) and from one address (beyond it that
  // address's oldest gives way if it has been in its handshake for unauthenticated_grace, else
  // the new one is refused with a REJECT saying so, and the library's connect retries with
  // backoff). Authenticated connections never count. One link opens up to 64 connections at once.
  size_t max_unauthenticated = 256;
  size_t max_unauthenticated_per_address = 64;
  // An honest handshake takes a few round trips (TLS included, under a second on any path);
  // silence this long marks a connection that may give way to a newcomer from its address.
  std::chrono::milliseconds unauthenticated_grace{1000};
  // Bytes of data that may arrive before the matching receive is posted; beyond this the
  // connection stops reading until the receive is posted (TCP backpressure, nothing is lost).
  uint64_t max_unexpected_bytes = 256ull << 20;
};

}  // namespace longhaul::net
