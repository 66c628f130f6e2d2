// What the kernel measures about a link's TCP connections (Linux TCP_INFO): the smoothed round
// trip time, the recent delivery rate and the bytes acknowledged and received. The peers report
// these per data link to the master (PEER_STATS, docs/protocol.md), which shows them on its status
// page: "bandwidth and RTT as the peers measure them" without any probe traffic of our own.
#pragma once

#include <cstdint>

namespace longhaul::net {

struct TcpStats {
  uint32_t connections = 0;     // connections that answered TCP_INFO
  uint64_t rtt_us = 0;          // the smallest smoothed RTT among them (0: none answered)
  uint64_t rtt_var_us = 0;      // its variance, as the kernel keeps it
  uint64_t delivery_rate = 0;   // bytes/s, summed over the connections (the kernel's estimate)
  uint64_t bytes_acked = 0;     // payload bytes the remote end acknowledged, summed
  uint64_t bytes_received = 0;  // payload bytes received, summed
  uint64_t retransmits = 0;     // segments retransmitted over the connections' lives, summed
};

// Adds the TCP_INFO of the connected socket `fd` into *total (connections, rates and byte counts
// sum; the RTT keeps the smallest). False, leaving *total as it was, when the kernel answers
// nothing (not a TCP socket, closed).
bool add_tcp_stats(int fd, TcpStats* total);

}  // namespace longhaul::net
