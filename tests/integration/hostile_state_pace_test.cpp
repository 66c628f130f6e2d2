// Members that know the secret and slow the group's shared-state syncs (issue 50, item 4): one
// whose report always comes just inside the report deadline, one whose reports are always refused.
// Each runs a real master process, two honest state peers and a rogue member that plays the state
// sync by hand over a real socket (rogue_member.hpp); each prints the honest members' syncs per
// second with the rogue and after its eviction.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "cluster.hpp"
#include "rogue_member.hpp"
#include "state/block_hash.hpp"

namespace longhaul::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The master's constant report deadline on the old tree; the rogue reports 500 ms inside it.
constexpr auto kRoundTimeout = 4000ms;
constexpr auto kJustInside = 3500ms;
// How long the honest members sync beside the rogue before the test gives up on its eviction.
constexpr auto kWindow = 40s;

// How the rogue plays each sync: how long it waits before reporting, and at which revision.
struct RogueSync {
  std::chrono::milliseconds delay;
  bool future_revision = false;  // the election refuses a report ahead of the group's revision
};

// The honest layout "w:f32:4096": one tensor of one block, under content the others do not hold.
wire::StateReportMsg rogue_report(uint64_t epoch, uint64_t revision) {
  wire::TensorReport t{"w", 0, 4096, {0x5eed}, {0}};
  return wire::StateReportMsg{epoch,
                              static_cast<uint32_t>(state::kBlockBytes),
                              revision,
                              wire::SyncStrategy::kEnforcePopular,
                              {t}};
}

// Reports `how.delay` after each of its syncs ended, as an honest member would except for the
// timing (or the revision), and finishes each OK plan at once without fetching.
void play_rogue(RogueMember& rogue, const RogueSync& how, const std::atomic<bool>& stop) {
  uint64_t revision = 0;
  while (!stop) {
    for (auto waited = 0ms; waited < how.delay && !stop; waited += 50ms)
      std::this_thread::sleep_for(50ms);
    if (stop || rogue.wait_removed(0ms)) return;
    rogue.send(rogue_report(rogue.epoch(), how.future_revision ? uint64_t{1} << 40 : revision));
    auto plan = rogue.wait_plan(kWindow);
    if (!plan) return;
    if (plan->code != LH_OK) continue;
    revision = plan->revision;
    rogue.send(wire::StateDoneMsg{plan->epoch, LH_OK, ""});
    rogue.wait_complete(kWindow);
  }
}

bool starts_with(const std::optional<std::string>& line, const std::string& prefix) {
  return line && line->rfind(prefix, 0) == 0;
}

std::optional<std::string> sync_line(Child& peer, size_t from) {
  return peer.wait_line([](const std::string& l) { return l.rfind("sync ", 0) == 0; }, 60s, from);
}

struct Pace {
  int syncs = 0;
  double seconds = 0;
  double per_second() const { return seconds > 0 ? syncs / seconds : 0; }
};

// Both honest members sync back to back until `window` passes or `done` says so; counts the
// syncs both ended OK.
template <typename Done>
Pace honest_syncs(Child& h1, Child& h2, Clock::duration window, Done done) {
  const auto t0 = Clock::now();
  Pace pace;
  while (Clock::now() - t0 < window && !done()) {
    const size_t from1 = h1.lines().size(), from2 = h2.lines().size();
    h1.send("sync enforce");
    h2.send("sync enforce");
    const auto l1 = sync_line(h1, from1), l2 = sync_line(h2, from2);
    if (!l1 || !l2) break;
    if (starts_with(l1, "sync LH_OK") && starts_with(l2, "sync LH_OK")) ++pace.syncs;
  }
  pace.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return pace;
}

bool ready(Child& p) {
  return p.wait_line([](const std::string& l) { return l.rfind("ready", 0) == 0; }, 30s)
      .has_value();
}

bool wait_world(Child& p, const std::string& world, size_t from = 0) {
  return p.wait_line([&](const std::string& l) { return l.rfind(world, 0) == 0; }, 30s, from)
      .has_value();
}

// Two honest state peers and the rogue in one group; the honest ones sync beside it until it is
// evicted (or the window passes), then re-form without it and sync for 3 s.
void run_scenario(const RogueSync& how, const char* what) {
  Cluster cluster({"--round-timeout-ms", std::to_string(kRoundTimeout.count())});
  const auto peer = [&] {
    return std::vector<std::string>{LONGHAUL_STATE_PEER_BIN, "--master", cluster.master_address(),
                                    "--layout", "w:f32:4096"};
  };
  Child h1(peer(), cluster.dir().path() + "/h1.log");
  ASSERT_TRUE(ready(h1)) << h1.stderr_text();
  Child h2(peer(), cluster.dir().path() + "/h2.log");
  h1.send("world 2");
  ASSERT_TRUE(ready(h2)) << h2.stderr_text();
  h2.send("world 2");
  RogueMember rogue(cluster.port(), {});
  rogue.register_with_master();
  h1.send("world 3");
  h2.send("world 3");
  ASSERT_TRUE(rogue.wait_admitted(30s));
  for (Child* p : {&h1, &h2}) ASSERT_TRUE(wait_world(*p, "world 3")) << p->stderr_text();

  std::atomic<bool> stop{false};
  std::thread rogue_thread([&] { play_rogue(rogue, how, stop); });
  const Pace with =
      honest_syncs(h1, h2, kWindow, [&] { return rogue.wait_removed(0ms).has_value(); });
  stop = true;
  rogue_thread.join();
  const auto removed = rogue.wait_removed(5s);
  std::cerr << what << ": honest syncs beside it: " << with.syncs << " in " << with.seconds
            << " s (" << with.per_second() << "/s); evicted: " << removed.value_or("(not evicted)")
            << "\n";
  ASSERT_TRUE(removed) << "still a member after " << with.seconds << " s";
  EXPECT_NE(removed->find("state syncs"), std::string::npos) << *removed;

  size_t from1 = h1.lines().size(), from2 = h2.lines().size();
  h1.send("update");
  h2.send("update");
  ASSERT_TRUE(wait_world(h1, "world 2", from1) && wait_world(h2, "world 2", from2));
  const Pace after = honest_syncs(h1, h2, 3s, [] { return false; });
  std::cerr << what << ": after its eviction: " << after.syncs << " in " << after.seconds << " s ("
            << after.per_second() << "/s)\n";
  EXPECT_GT(after.per_second(), 5.0);
}

// On the old tree each honest sync waited for the rogue's report, 3.5 s every time, for good (the
// report deadline was the constant 4 s). Now the deadline follows the group (2 s, the floor) and a
// member outside it in 3 of its last 8 syncs is evicted.
TEST(HostileStatePace, AMemberReportingJustInsideTheOldDeadlineIsEvicted) {
  run_scenario({kJustInside}, "a report 3.5 s after the others'");
}

// On the old tree a refused report (here: a revision ahead of the group's) counted as taking part
// in time: the rogue held each sync for its 1.5 s and was never evicted. Now a refused report makes
// its member the sync's outlier like a late one.
TEST(HostileStatePace, AMemberWhoseReportsAreRefusedIsEvicted) {
  run_scenario({1500ms, true}, "a refused report 1.5 s after the others'");
}

}  // namespace
}  // namespace longhaul::testing
