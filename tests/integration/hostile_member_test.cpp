// Members that know the secret and misbehave (issue 24, items 6 and 7): DATA frames that only fill
// the receiver's unexpected-data table, DATA sent to the master, which receives none, and state
// reports of many tensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <sstream>
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
  runtime::IoRuntime io(2);
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
  runtime::IoRuntime io(2);
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

// A state_peer of the given layout (and `extra` arguments); a joiner's "ready" comes once the
// members admit it (ready()).
std::unique_ptr<Child> start_state_peer(Cluster& cluster, const std::string& name,
                                        const std::string& layout,
                                        std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {LONGHAUL_STATE_PEER_BIN, "--master", cluster.master_address(),
                                   "--layout", layout};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return std::make_unique<Child>(argv, cluster.dir().path() + "/" + name + ".log");
}

bool ready(Child& peer) {
  return peer.wait_line([](const std::string& l) { return l.rfind("ready", 0) == 0; }, 60s)
      .has_value();
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Both honest peers run `n` syncs together; the slower one's wall time in ms (-1 on failure).
double honest_syncs(Child& a, Child& b, size_t n) {
  const size_t from_a = a.lines().size(), from_b = b.lines().size();
  a.send("syncs " + std::to_string(n));
  b.send("syncs " + std::to_string(n));
  const auto done = [n](const std::string& l) {
    return l.rfind("syncs " + std::to_string(n) + " ok " + std::to_string(n) + " ", 0) == 0;
  };
  const auto la = a.wait_line(done, 120s, from_a), lb = b.wait_line(done, 120s, from_b);
  if (!la || !lb) return -1;
  return std::max(std::stod(la->substr(la->rfind(' '))), std::stod(lb->substr(lb->rfind(' '))));
}

size_t heavy_reports(Cluster& cluster) {
  return count_of(cluster.master().stderr_text(), "group 1 state sync at");
}

// The master's CPU per sync of group 1 over `window` (the honest members idle), in ms; prints the
// heavy member's own too.
double master_ms_per_heavy_sync(Cluster& cluster, Child& heavy, std::chrono::milliseconds window) {
  const size_t reports0 = heavy_reports(cluster);
  const double cpu0 = cpu_seconds(cluster.master().pid()), own0 = cpu_seconds(heavy.pid());
  std::this_thread::sleep_for(window);
  const double cpu = cpu_seconds(cluster.master().pid()) - cpu0;
  const double own = cpu_seconds(heavy.pid()) - own0;
  const size_t reports = heavy_reports(cluster) - reports0;
  std::cerr << "in " << window.count() << " ms, " << reports << " syncs of 65536 tensors cost the "
            << "master " << cpu * 1e3 << " ms of CPU and their member " << own * 1e3 << " ms\n";
  return reports ? cpu * 1e3 / static_cast<double>(reports) : 0;
}

// Issue 24, item 7: a member in another group reporting the most tensors the master allows
// (65536 of one float each: "w" and 65535 more) every sync, as fast as it can, beside two honest
// members syncing a small state. Prints the master's CPU per such sync and the honest syncs' pace
// with and without it. On one machine the heavy member's own CPU (it hashes and encodes 65536
// tensors per sync) competes with the honest members' as much as the master's does, so the pace
// check is loose (above a quarter: unbounded reports of 400,000 tensors cut it ~5x); the master's
// CPU per such sync (CPU time, which a loaded machine does not inflate much) must stay below 50 ms.
TEST(HostileMember, AReportOfTheMostTensorsAllowedCostsTheMasterLittle) {
  Cluster cluster;
  auto a = start_state_peer(cluster, "honest_a", "w:f32:1024");
  ASSERT_TRUE(ready(*a)) << a->stderr_text();
  auto b = start_state_peer(cluster, "honest_b", "w:f32:1024");
  a->send("world 2");
  ASSERT_TRUE(ready(*b)) << b->stderr_text();
  b->send("world 2");
  for (Child* p : {a.get(), b.get()})
    ASSERT_TRUE(p->wait_line([](const std::string& l) { return l.rfind("world 2", 0) == 0; }, 30s))
        << p->stderr_text();
  constexpr size_t kSyncs = 4000;
  ASSERT_GT(honest_syncs(*a, *b, 10), 0);  // warm up
  const double alone_ms = honest_syncs(*a, *b, kSyncs);
  ASSERT_GT(alone_ms, 0);

  auto heavy =
      start_state_peer(cluster, "heavy", "w:f32:1", {"--group", "1", "--tiny-tensors", "65535"});
  // The honest members admit it at their next update_topology once it has registered.
  for (int i = 0;
       i < 600 && cluster.master().stderr_text().find("joined group 1") == std::string::npos; ++i)
    std::this_thread::sleep_for(50ms);
  a->send("update");
  b->send("update");
  ASSERT_TRUE(ready(*heavy)) << heavy->stderr_text();
  heavy->send("syncs 1000000");
  for (int i = 0; i < 600 && heavy_reports(cluster) < 2; ++i) std::this_thread::sleep_for(50ms);
  ASSERT_GE(heavy_reports(cluster), 2u) << heavy->stderr_text();
  const double per_sync_ms = master_ms_per_heavy_sync(cluster, *heavy, 3s);
  const double beside_ms = honest_syncs(*a, *b, kSyncs);
  ASSERT_GT(beside_ms, 0);
  std::cerr << kSyncs << " honest syncs: " << alone_ms << " ms alone, " << beside_ms
            << " ms beside a member syncing 65536 tensors (honest pace x" << alone_ms / beside_ms
            << "); the master's CPU per sync of 65536 tensors: " << per_sync_ms << " ms\n";
  EXPECT_GT(per_sync_ms, 0);
  EXPECT_LT(per_sync_ms, 50);
  EXPECT_LT(beside_ms, 4 * alone_ms);
}

// The word after `key` in `line` ("blocks 3 sources ..." -> "3" for key "blocks").
std::string field(const std::string& line, const std::string& key) {
  std::istringstream in(line);
  for (std::string w; in >> w;)
    if (w == key && in >> w) return w;
  return {};
}

// Issue 50, item 7: in a group of two, the first member (the lowest id) alters its state after
// the group agreed on it. On 34a8959 the tie went to the lowest id and the honest member was told
// to fetch the altered content. Now it goes to the member still holding what the group last agreed
// on: the honest member fetches nothing and keeps its bytes; the other one is repaired.
TEST(HostileMember, InAGroupOfTwoATieGoesToTheStateTheGroupLastAgreedOn) {
  Cluster cluster;
  auto first = start_state_peer(cluster, "first", "w:f32:65536");
  ASSERT_TRUE(ready(*first)) << first->stderr_text();
  auto honest = start_state_peer(cluster, "honest", "w:f32:65536");
  first->send("world 2");
  ASSERT_TRUE(ready(*honest)) << honest->stderr_text();
  honest->send("world 2");
  const auto sync_line = [](Child& p, size_t from) {
    return p.wait_line([](const std::string& l) { return l.rfind("sync ", 0) == 0; }, 30s, from);
  };
  for (Child* p : {first.get(), honest.get()}) {
    ASSERT_TRUE(p->wait_line([](const std::string& l) { return l.rfind("world 2", 0) == 0; }, 30s))
        << p->stderr_text();
    p->send("fill 7");
  }
  size_t from_first = first->lines().size(), from_honest = honest->lines().size();
  first->send("sync enforce");
  honest->send("sync enforce");
  auto agreed = sync_line(*honest, from_honest);
  ASSERT_TRUE(agreed && agreed->rfind("sync LH_OK", 0) == 0) << honest->stderr_text();
  ASSERT_TRUE(sync_line(*first, from_first).has_value());
  const std::string agreed_hash = field(*agreed, "hash");

  first->send("flip 0 100 3");  // one bit of its only tensor: a tie, one voter each
  from_first = first->lines().size();
  from_honest = honest->lines().size();
  first->send("sync enforce");
  honest->send("sync enforce");
  const auto h = sync_line(*honest, from_honest);
  const auto f = sync_line(*first, from_first);
  ASSERT_TRUE(h && f) << honest->stderr_text() << first->stderr_text();
  std::cerr << "tie in a group of two: honest: " << *h << "\n  first: " << *f << "\n";
  EXPECT_EQ(h->rfind("sync LH_OK", 0), 0u) << *h;
  EXPECT_EQ(field(*h, "blocks"), "0") << "the honest member was told to fetch: " << *h;
  EXPECT_EQ(field(*h, "hash"), agreed_hash);
  EXPECT_EQ(field(*f, "hash"), agreed_hash) << "the altered member is repaired: " << *f;
}

}  // namespace
}  // namespace longhaul::testing
