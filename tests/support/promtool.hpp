// Runs Debian's `promtool check metrics` (package prometheus, installed by scripts/setup.sh) on a
// metrics document, for the tests of the Prometheus text encoder and of the master's /metrics.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "process.hpp"

namespace longhaul::testing {

// Success when promtool accepts `text` (no error and no lint problem); otherwise its output.
inline ::testing::AssertionResult promtool_accepts(const std::string& text) {
  TempDir dir;
  const std::string in = dir.path() + "/metrics.txt", out = dir.path() + "/promtool.out";
  std::ofstream(in, std::ios::binary) << text;
  const std::string command = "promtool check metrics < '" + in + "' > '" + out + "' 2>&1";
  const int rc = std::system(command.c_str());
  std::ifstream result(out);
  const std::string said((std::istreambuf_iterator<char>(result)), {});
  if (rc == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "promtool check metrics exited " << (WIFEXITED(rc) ? WEXITSTATUS(rc) : -1)
         << " (127: not installed, run scripts/setup.sh): " << said << "\non:\n"
         << text;
}

}  // namespace longhaul::testing
