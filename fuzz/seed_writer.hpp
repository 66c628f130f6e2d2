// What the seed maker's parts share (make_seeds.cpp writes, control_seeds.cpp composes).
#pragma once

#include <cstddef>
#include <vector>

#include "wire/control_messages.hpp"
#include "wire_fuzz_format.hpp"

namespace longhaul::fuzz {

// Writes `<dir>/<name>`: the mode byte, then `body`. Exits with a message when it cannot.
void write_seed(const char* name, Mode mode, const std::vector<std::byte>& body);
// A kControl seed of `message`'s encoding; counts its type as seeded.
void write_control_seed(const char* name, const wire::ControlMessage& message);

// One seed (or more) of every control message type, valid ones and ones just past a limit.
void control_seeds();

}  // namespace longhaul::fuzz
