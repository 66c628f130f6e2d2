#include "wanlab/packet.hpp"

#include <algorithm>
#include <cstring>

namespace longhaul::wanlab {
namespace {

// struct virtio_net_hdr (linux/virtio_net.h, whose later parts do not compile as C++): little
// endian on this host, as TUN's default.
struct virtio_net_hdr {
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;
  uint16_t gso_size;
  uint16_t csum_start;
  uint16_t csum_offset;
};
static_assert(sizeof(virtio_net_hdr) == kVnetHeaderBytes);
constexpr uint8_t VIRTIO_NET_HDR_F_NEEDS_CSUM = 1;
constexpr uint8_t VIRTIO_NET_HDR_GSO_NONE = 0;
constexpr uint8_t VIRTIO_NET_HDR_GSO_TCPV4 = 1;
constexpr uint8_t VIRTIO_NET_HDR_GSO_ECN = 0x80;

uint16_t get16(const std::byte* p) {  // network byte order
  return static_cast<uint16_t>((std::to_integer<unsigned>(p[0]) << 8) |
                               std::to_integer<unsigned>(p[1]));
}
void put16(std::byte* p, uint16_t v) {
  p[0] = static_cast<std::byte>(v >> 8);
  p[1] = static_cast<std::byte>(v & 0xff);
}
uint32_t get32(const std::byte* p) {
  return (uint32_t{get16(p)} << 16) | get16(p + 2);
}
void put32(std::byte* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v & 0xffff));
}

uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

// The IPv4 header checksum is checked by every receiver (no offload covers it).
void set_ip_checksum(std::byte* ip, size_t header_bytes) {
  put16(ip + 10, 0);
  uint32_t sum = 0;
  for (size_t i = 0; i < header_bytes; i += 2) sum += get16(ip + i);
  put16(ip + 10, static_cast<uint16_t>(~fold(sum)));
}

// With VIRTIO_NET_HDR_F_NEEDS_CSUM the TCP checksum field holds the pseudo-header's sum, not
// complemented (the stack adds the segment's bytes); it depends on the segment's length.
void set_pseudo_checksum(std::byte* ip, std::byte* tcp, uint16_t tcp_bytes) {
  uint32_t sum = get16(ip + 12) + get16(ip + 14) + get16(ip + 16) + get16(ip + 18);
  sum += 6 + tcp_bytes;  // IPPROTO_TCP, TCP length
  put16(tcp + 16, fold(sum));
}

virtio_net_hdr read_vnet(std::span<const std::byte> frame) {
  virtio_net_hdr h;
  std::memcpy(&h, frame.data(), sizeof h);
  return h;
}

}  // namespace

bool inspect(std::span<const std::byte> frame, PacketInfo* out) {
  if (frame.size() < kVnetHeaderBytes + 20) return false;
  const std::byte* ip = frame.data() + kVnetHeaderBytes;
  if ((std::to_integer<unsigned>(ip[0]) >> 4) != 4) return false;
  out->dst_ipv4 = get32(ip + 16);
  const size_t ip_bytes = frame.size() - kVnetHeaderBytes;
  const virtio_net_hdr h = read_vnet(frame);
  out->segments = 1;
  out->wire_bytes = ip_bytes;
  const unsigned gso = h.gso_type & ~VIRTIO_NET_HDR_GSO_ECN;
  if (gso == VIRTIO_NET_HDR_GSO_TCPV4 && h.gso_size > 0) {
    const size_t ihl = (std::to_integer<unsigned>(ip[0]) & 0xf) * 4;
    if (ip_bytes < ihl + 20) return false;
    const size_t headers = ihl + (std::to_integer<unsigned>(ip[ihl + 12]) >> 4) * 4;
    if (ip_bytes <= headers) return true;
    out->segments = (ip_bytes - headers + h.gso_size - 1) / h.gso_size;
    out->wire_bytes = ip_bytes + (out->segments - 1) * headers;
  }
  return true;
}

std::vector<std::vector<std::byte>> split_segments(std::span<const std::byte> frame,
                                                   const std::vector<bool>& keep) {
  std::vector<std::vector<std::byte>> out;
  const virtio_net_hdr h = read_vnet(frame);
  const std::byte* ip = frame.data() + kVnetHeaderBytes;
  const size_t ip_bytes = frame.size() - kVnetHeaderBytes;
  const bool tcp4_gso = (h.gso_type & ~VIRTIO_NET_HDR_GSO_ECN) == VIRTIO_NET_HDR_GSO_TCPV4 &&
                        h.gso_size > 0 && keep.size() > 1;
  if (!tcp4_gso) {
    if (!keep.empty() && keep[0]) out.emplace_back(frame.begin(), frame.end());
    return out;
  }
  const size_t ihl = (std::to_integer<unsigned>(ip[0]) & 0xf) * 4;
  const size_t thl = (std::to_integer<unsigned>(ip[ihl + 12]) >> 4) * 4;
  const size_t headers = ihl + thl;
  const uint16_t ip_id = get16(ip + 4);
  const uint32_t seq = get32(ip + ihl + 4);
  const unsigned flags = std::to_integer<unsigned>(ip[ihl + 13]);
  for (size_t i = 0; i < keep.size(); ++i) {
    const size_t offset = headers + i * h.gso_size;
    if (offset >= ip_bytes) break;
    if (!keep[i]) continue;
    const size_t payload = std::min<size_t>(h.gso_size, ip_bytes - offset);
    const bool last = offset + payload >= ip_bytes;
    std::vector<std::byte> seg(kVnetHeaderBytes + headers + payload);
    virtio_net_hdr sh = h;
    sh.gso_type = VIRTIO_NET_HDR_GSO_NONE;
    sh.gso_size = 0;
    sh.hdr_len = 0;
    sh.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;  // the checksum left to the receiver, as for TSO
    sh.csum_start = static_cast<uint16_t>(ihl);
    sh.csum_offset = 16;  // offsetof(struct tcphdr, check)
    std::memcpy(seg.data(), &sh, sizeof sh);
    std::byte* sip = seg.data() + kVnetHeaderBytes;
    std::memcpy(sip, ip, headers);
    std::memcpy(sip + headers, ip + offset, payload);
    put16(sip + 2, static_cast<uint16_t>(headers + payload));
    put16(sip + 4, static_cast<uint16_t>(ip_id + i));
    set_ip_checksum(sip, ihl);
    std::byte* tcp = sip + ihl;
    put32(tcp + 4, seq + static_cast<uint32_t>(i * h.gso_size));
    // FIN and PSH belong to the last segment, CWR to the first (as the kernel's tcp_gso_segment).
    unsigned f = flags;
    if (!last) f &= ~0x09u;
    if (i > 0) f &= ~0x80u;
    tcp[13] = static_cast<std::byte>(f);
    set_pseudo_checksum(sip, tcp, static_cast<uint16_t>(thl + payload));
    out.push_back(std::move(seg));
  }
  return out;
}

}  // namespace longhaul::wanlab
