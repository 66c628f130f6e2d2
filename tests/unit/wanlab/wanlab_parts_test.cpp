// The packet lab's parts without namespaces: path settings, the path model's bottleneck, delay,
// loss and order, and cutting a TCP super-packet into its wire packets.
#include <cstring>

#include <gtest/gtest.h>

#include "wanlab/lab_spec.hpp"
#include "wanlab/packet.hpp"
#include "wanlab/path_model.hpp"

namespace longhaul::wanlab {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST(PathSetting, ReadsBothDirectionsOneDirectionAndRefusesNonsense) {
  PathSetting s;
  ASSERT_TRUE(parse_path_setting("eu-us,latency_ms=40,loss=0.001", &s));
  EXPECT_EQ(s.from, "eu");
  EXPECT_EQ(s.to, "us");
  EXPECT_TRUE(s.both_directions);
  PathShape shape;
  ASSERT_TRUE(apply_setting(s, &shape));
  EXPECT_EQ(shape.latency_ms, 40);
  EXPECT_EQ(shape.loss, 0.001);
  PathSetting one;
  ASSERT_TRUE(parse_path_setting("a>b", &one));
  EXPECT_FALSE(one.both_directions);
  for (const char* bad : {"ab", "a-a", "a-b,color=red", "a-b,loss=2", "A-b", "a-b,latency_ms"}) {
    PathSetting x;
    EXPECT_FALSE(parse_path_setting(bad, &x)) << bad;
  }
  LabSpec spec;
  spec.sites = {"a"};
  EXPECT_FALSE(check_lab_spec(spec));
  spec.sites = {"a", "b"};
  spec.paths.push_back(one);
  EXPECT_TRUE(check_lab_spec(spec));
  spec.paths[0].to = "c";
  EXPECT_FALSE(check_lab_spec(spec));
}

TEST(PathModel, DelaysSerialisesAtTheRateAndDropsWhatOverflowsTheQueue) {
  PathShape shape;
  shape.latency_ms = 50;
  shape.rate_mbit = 8;  // 1 byte per microsecond
  shape.queue_ms = 10;  // 10 000 bytes of queue
  PathModel p(shape, 1);
  auto first = p.admit(0, 1000, 1);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, 1 * kMs + 50 * kMs);  // 1000 bytes take 1 ms, then 50 ms of delay
  int admitted = 1;
  while (p.admit(0, 1000, 1)) ++admitted;
  EXPECT_EQ(admitted, 11);  // the one on the wire and ten waiting 1..10 ms
  EXPECT_EQ(p.counters().queue_dropped, 1u);
  EXPECT_TRUE(p.would_overflow(0, 1000));
  EXPECT_FALSE(p.would_overflow(20 * kMs, 1000));  // drained by then
}

TEST(PathModel, JitterNeverReordersAndLossIsDrawnAtItsRate) {
  PathShape shape;
  shape.latency_ms = 10;
  shape.jitter_ms = 9;
  shape.loss = 0.01;
  PathModel p(shape, 7);
  int64_t last = 0;
  for (int i = 0; i < 10000; ++i) {
    const auto due = p.admit(int64_t{i} * 1000, 100, 1);
    ASSERT_TRUE(due);
    EXPECT_GE(*due, last);
    EXPECT_GE(*due, int64_t{i} * 1000 + 1 * kMs);
    last = *due;
  }
  int lost = 0;
  for (int i = 0; i < 100000; ++i) lost += p.draw_loss() ? 1 : 0;
  EXPECT_GT(lost, 800);
  EXPECT_LT(lost, 1200);
}

// A TCP/IPv4 super-packet as a TUN device with offloads hands it over: vnet header (GSO TCPv4,
// checksum left to the receiver), 20 bytes of IP, 20 of TCP, `payload` bytes.
std::vector<std::byte> super_packet(size_t payload, uint16_t mss, uint8_t tcp_flags) {
  std::vector<std::byte> f(kVnetHeaderBytes + 40 + payload);
  const uint8_t vnet[10] = {1,  1, 40, 0, static_cast<uint8_t>(mss), static_cast<uint8_t>(mss >> 8),
                            20, 0, 16, 0};
  std::memcpy(f.data(), vnet, sizeof vnet);
  std::byte* ip = f.data() + kVnetHeaderBytes;
  ip[0] = std::byte{0x45};
  const size_t total = 40 + payload;
  ip[2] = static_cast<std::byte>(total >> 8);
  ip[3] = static_cast<std::byte>(total);
  ip[5] = std::byte{7};  // id 7
  ip[8] = std::byte{64};
  ip[9] = std::byte{6};
  const uint8_t addrs[8] = {10, 214, 0, 1, 10, 214, 0, 2};
  std::memcpy(ip + 12, addrs, 8);
  ip[24] = std::byte{0x12};  // seq 0x12000000
  ip[32] = std::byte{0x50};  // data offset 5
  ip[33] = static_cast<std::byte>(tcp_flags);
  for (size_t i = 0; i < payload; ++i) ip[40 + i] = static_cast<std::byte>(i * 13);
  return f;
}

uint16_t ip_checksum_of(const std::byte* ip) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2)
    sum += (std::to_integer<uint32_t>(ip[i]) << 8) | std::to_integer<uint32_t>(ip[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

TEST(Packet, ASuperPacketStandsForItsWirePacketsAndIsCutIntoThem) {
  const auto frame = super_packet(3000, 1448, 0x18 | 0x01);  // PSH ACK FIN
  PacketInfo info;
  ASSERT_TRUE(inspect(frame, &info));
  EXPECT_EQ(info.segments, 3u);  // 1448 + 1448 + 104
  EXPECT_EQ(info.wire_bytes, 3040u + 2 * 40);
  EXPECT_EQ(info.dst_ipv4, (10u << 24) | (214u << 16) | 2u);
  const auto segs = split_segments(frame, {true, false, true});  // the middle one lost
  ASSERT_EQ(segs.size(), 2u);
  const std::byte* a = segs[0].data() + kVnetHeaderBytes;
  const std::byte* c = segs[1].data() + kVnetHeaderBytes;
  EXPECT_EQ(segs[0].size(), kVnetHeaderBytes + 40 + 1448);
  EXPECT_EQ(segs[1].size(), kVnetHeaderBytes + 40 + 104);
  EXPECT_EQ(ip_checksum_of(a), 0);  // a valid header sums to zero
  EXPECT_EQ(ip_checksum_of(c), 0);
  EXPECT_EQ(std::to_integer<int>(c[5]), 7 + 2);  // the third packet's IP id
  // Sequence numbers: the third starts 2 MSS in; FIN and PSH only on the last.
  EXPECT_EQ(std::to_integer<int>(c[24]), 0x12);
  EXPECT_EQ((std::to_integer<int>(c[24 + 2]) << 8) | std::to_integer<int>(c[24 + 3]), 2 * 1448);
  EXPECT_EQ(std::to_integer<int>(a[33]) & 0x09, 0);
  EXPECT_EQ(std::to_integer<int>(c[33]) & 0x09, 0x09);
  EXPECT_EQ(std::to_integer<int>(segs[1][1]), 0);  // no GSO left
  EXPECT_EQ(std::memcmp(c + 40, frame.data() + kVnetHeaderBytes + 40 + 2 * 1448, 104), 0);
  EXPECT_TRUE(split_segments(frame, {false, false, false}).empty());
}

}  // namespace
}  // namespace longhaul::wanlab
