// The adaptive round deadline (EngineOptions::adaptive_deadline, docs/training.md "Settling a
// round"): how long a round may take before this peer drops it, from what the group measured.
//
// Each applied round's masks carry every member's sync time of the last round it finished
// (overlap.hpp). The sample a round gives is the fastest of them (GroupReport::fastest_sync_ms):
// the member that launched last waited for nobody, so its launch-to-ready time is the round's time
// on the network, while the others' include waiting for the last one (a member that is always late
// must not stretch the deadline meant to catch it). Over the last kWindow samples, the deadline is
//   clamp(median + max(4 · MAD, median / 2), kFloor, cap)
// (MAD: the median absolute deviation), the cap alone until kMinSamples were taken. A local
// figure: members may use different deadlines, and a joiner or a resumed peer starts from the cap.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>

namespace longhaul::sync {

class RoundDeadline {
 public:
  static constexpr size_t kWindow = 16;     // the last applied rounds' samples kept
  static constexpr size_t kMinSamples = 4;  // fewer: the cap
  // The least deadline it gives. Scheduling jitter on a loaded machine (a thread that waits tens
  // to hundreds of milliseconds for a core) and a trainer's own step-time jitter would drop rounds
  // that a tighter deadline catches for nothing; and a round that costs less than a second on the
  // network gains nothing from one: waiting a second for it costs little.
  static constexpr std::chrono::milliseconds kFloor{1000};

  // `cap`: the user's deadline (0: none, and deadline() is 0).
  explicit RoundDeadline(std::chrono::milliseconds cap) : cap_(cap) {}

  // One applied round's sample, in ms; 0, negative or not finite: nothing measured, ignored.
  void add(float sample_ms);
  // The deadline the next round uses (0: none).
  std::chrono::milliseconds deadline() const;
  size_t samples() const { return count_; }

 private:
  std::chrono::milliseconds cap_;
  std::array<float, kWindow> window_{};
  size_t next_ = 0, count_ = 0;  // the slot the next sample goes to; samples held
};

}  // namespace longhaul::sync
