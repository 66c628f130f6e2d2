// The schedules every collective chooses from, and what an operation reports back.
#pragma once

#include <cstddef>
#include <cstdint>

namespace longhaul::collective {

// ring: the data passes from neighbour to neighbour, N-1 steps per phase (ring.hpp, gather.hpp).
// direct: every member sends straight to the member that needs the data; one step per phase,
// a quantized contribution encoded once; needs a link to every member (direct.hpp, gather.hpp).
enum class Schedule : uint8_t { kAuto = 0, kRing = 1, kDirect = 2 };
const char* schedule_name(Schedule s);

// What an operation moved, and how.
struct OpInfo {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  size_t world_size = 0;  // members the operation ran with
  Schedule schedule = Schedule::kRing;
};

}  // namespace longhaul::collective
