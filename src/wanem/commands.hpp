// The line protocol on stdin: one command per line, one answer line per command, "OK ..." or
// "ERR <reason>". See docs/wanem.md for the full list.
#pragma once

#include <string>
#include <string_view>

#include "wanem/emulator.hpp"

namespace longhaul::wanem {

struct CommandResult {
  std::string reply;  // one line without the newline; empty for a blank input line (no answer)
  bool quit = false;  // the command was `quit`
};

CommandResult execute_command(Emulator& emulator, std::string_view line);

}  // namespace longhaul::wanem
