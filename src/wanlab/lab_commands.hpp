// The lab's stdin protocol: one command per line, one answer line each ("OK ..." or "ERR ...").
#pragma once

#include <string>

#include "wanlab/forwarder.hpp"
#include "wanlab/lab.hpp"

namespace longhaul::wanlab {

struct LabReply {
  std::string line;  // empty for a blank command line
  bool quit = false;
};

// set A-B|A>B key=value...   blackhole A-B|A>B   heal A-B|A>B   stats A>B   counters   quit
LabReply execute_lab_command(Forwarder& forwarder, Lab& lab, const std::string& line);

}  // namespace longhaul::wanlab
