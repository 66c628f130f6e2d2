// IP packets as the TUN devices hand them over: a virtio_net_hdr (10 bytes) and an IP packet,
// which with offloads on may be a TCP super-packet of up to 64 KiB standing for several wire
// packets (GSO: one MSS segment each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace longhaul::wanlab {

inline constexpr size_t kVnetHeaderBytes = 10;  // sizeof(struct virtio_net_hdr)

struct PacketInfo {
  uint32_t dst_ipv4 = 0;    // host byte order
  uint64_t segments = 1;    // wire packets it stands for
  uint64_t wire_bytes = 0;  // the bytes those wire packets carry, headers of each included
};

// Reads the headers of `frame` (vnet header + packet). False when it is not IPv4 or is too short
// to route; IPv6 and other protocols are not routed by the lab.
bool inspect(std::span<const std::byte> frame, PacketInfo* out);

// Splits a TCP/IPv4 super-packet into its wire packets (each with its own vnet header, checksum
// left to the receiver's stack as the super-packet's was). keep[i] says whether segment i is kept;
// only kept ones are returned. A frame that is not a TCP/IPv4 GSO frame comes back whole if
// keep[0], else nothing.
std::vector<std::vector<std::byte>> split_segments(std::span<const std::byte> frame,
                                                   const std::vector<bool>& keep);

}  // namespace longhaul::wanlab
