// What longhaul_allreduce_peer prints for each step it completed (allreduce_peer.cpp), parsed for
// the tests that run it.
#pragma once

#include <cstdint>
#include <map>
#include <sstream>
#include <string>

#include "process.hpp"

namespace longhaul::testing {

struct StepLine {
  uint64_t epoch = 0;
  int64_t world = 0;
  std::string hash;
  double maxerr = 0;
  int64_t ms = 0;
};

// Step number -> its line, for every 'step ...' line the peer printed.
inline std::map<long, StepLine> steps_of(const Child& c) {
  std::map<long, StepLine> out;
  for (const std::string& l : c.lines()) {
    if (l.rfind("step ", 0) != 0) continue;
    std::istringstream in(l);
    std::string w, k1, k2, k3, k4, k5;
    long step = 0;
    StepLine s;
    in >> w >> step >> k1 >> s.epoch >> k2 >> s.world >> k3 >> s.hash >> k4 >> s.maxerr >> k5 >>
        s.ms;
    if (in && k5 == "ms") out[step] = s;
  }
  return out;
}

}  // namespace longhaul::testing
