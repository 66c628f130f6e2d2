// Members that know the secret and misbehave (issue 24, item 6): DATA frames that only fill the
// receiver's unexpected-data table, and DATA sent to the master, which receives none.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "cluster.hpp"
#include "net/endpoint.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;

uint64_t own_resident_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// Empty DATA segments under fresh operation ids, nobody receiving them: each is counted against
// the receiver's unexpected-data bound (1 MiB here), so the receiver stops reading instead of
// growing a table (the old tree stored every one for free: ~120 bytes each, without limit).
TEST(HostileMember, EmptyDataUnderFreshIdsIsBoundedLikeAnyUnexpectedData) {
  net::IoRuntime io(2);
  net::TransportOptions bounded;
  bounded.max_unexpected_bytes = 1u << 20;
  auto listener = net::Listener::create(io, "127.0.0.1", 0, bounded);
  ASSERT_TRUE(listener.is_ok()) << listener.status().to_string();
  std::shared_ptr<net::Link> receiver;
  std::atomic<bool> linked{false};
  (*listener)->start([&](std::shared_ptr<net::Link> link, net::Role) {
    receiver = link;
    receiver->start();
    linked = true;
  });
  auto sender = net::connect_link(io, "127.0.0.1", (*listener)->port(), 1, {});
  ASSERT_TRUE(sender.is_ok()) << sender.status().to_string();
  (*sender)->start();
  for (int i = 0; i < 500 && !linked; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(linked);
  const uint64_t before = own_resident_bytes();
  constexpr uint64_t kFrames = 300'000;
  std::atomic<uint64_t> sent{0};
  for (uint64_t id = 1; id <= kFrames; ++id)
    (*sender)->send(id, {}, [&](Status) { sent.fetch_add(1); });
  std::this_thread::sleep_for(3s);
  const uint64_t grown = own_resident_bytes() - std::min(before, own_resident_bytes());
  // The receiver parks at the bound: at most 1 MiB / 128 bytes of bookkeeping per segment held;
  // the rest waits at the sender or in the kernel.
  const size_t held = receiver->unexpected_segments();
  EXPECT_LE(held, (1u << 20) / 128);
  EXPECT_LT(sent.load(), kFrames);
  std::cerr << "sent " << sent.load() << " of " << kFrames << " empty DATA frames in 3 s; the "
            << "receiver holds " << held << "; this process's RSS +" << grown / 1024
            << " KiB (the sender's queue included)\n";
  (*sender)->close();
  if (receiver) receiver->close();
  (*listener)->close();
}

// DATA to the master is a protocol error that closes the link (the master posts no receives; the
// old tree buffered up to 256 MiB of it per link).
TEST(HostileMember, DataSentToTheMasterClosesTheLink) {
  Cluster cluster;
  net::IoRuntime io(2);
  auto link = net::connect_link(io, "127.0.0.1", cluster.port(), 1, {});
  ASSERT_TRUE(link.is_ok()) << link.status().to_string();
  (*link)->start();
  std::vector<std::byte> payload(1 << 20, std::byte{7});
  (*link)->send(42, payload, [](Status) {});
  for (int i = 0; i < 500 && (*link)->failure().is_ok(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE((*link)->failure().is_ok());
  (*link)->close();
  EXPECT_NE(cluster.master().stderr_text().find("DATA frame to the master"), std::string::npos)
      << cluster.master().stderr_text();
  Child& honest = cluster.add_peer();
  EXPECT_TRUE(cluster.wait_agreement({&honest}, 1, 30s));
}

// A member reporting more tensors than the master allows is dropped with the reason; the honest
// member's sync completes (the old tree planned any report up to the wire's 1,048,576 tensors:
// ~100 ms of the master's CPU per sync at 400,000).
TEST(HostileMember, AStateReportOfTooManyTensorsDropsItsSenderAndTheOthersSync) {
  Cluster cluster({"--max-state-tensors", "100"});
  std::string layout;
  for (int i = 0; i < 150; ++i) layout += (i ? ",t" : "t") + std::to_string(i) + ":f32:1";
  const auto ready = [](Child& p) {
    return p.wait_line([](const std::string& l) { return l.rfind("ready", 0) == 0; }, 30s);
  };
  // The honest member first (a later one waits in connect until a member admits it).
  Child honest(
      {LONGHAUL_STATE_PEER_BIN, "--master", cluster.master_address(), "--layout", "w:f32:1024"},
      cluster.dir().path() + "/honest.log");
  ASSERT_TRUE(ready(honest)) << honest.stderr_text();
  Child many({LONGHAUL_STATE_PEER_BIN, "--master", cluster.master_address(), "--layout", layout},
             cluster.dir().path() + "/many.log");
  honest.send("world 2");
  ASSERT_TRUE(ready(many)) << many.stderr_text();
  many.send("world 2");
  for (Child* p : {&honest, &many})
    ASSERT_TRUE(p->wait_line([](const std::string& l) { return l.rfind("world 2", 0) == 0; }, 30s))
        << p->stderr_text();
  honest.send("sync enforce");
  many.send("sync enforce");
  const auto refused =
      many.wait_line([](const std::string& l) { return l.rfind("sync ", 0) == 0; }, 30s);
  ASSERT_TRUE(refused.has_value()) << many.stderr_text();
  EXPECT_EQ(refused->find("sync LH_OK"), std::string::npos) << *refused;
  EXPECT_NE(cluster.master().stderr_text().find("--max-state-tensors"), std::string::npos)
      << cluster.master().stderr_text();
  // The honest member's sync fails at most once (its group lost a member mid-sync), then passes.
  auto line = honest.wait_line([](const std::string& l) { return l.rfind("sync ", 0) == 0; }, 30s);
  ASSERT_TRUE(line.has_value()) << honest.stderr_text();
  if (line->rfind("sync LH_OK", 0) != 0) {
    honest.send("update");
    honest.send("sync enforce");
    line =
        honest.wait_line([](const std::string& l) { return l.rfind("sync LH_OK", 0) == 0; }, 30s);
  }
  EXPECT_TRUE(line.has_value() && line->rfind("sync LH_OK", 0) == 0) << honest.stderr_text();
}

}  // namespace
}  // namespace longhaul::testing
