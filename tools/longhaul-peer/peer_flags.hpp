// Command line of longhaul-peer: every flag, its default, and the parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "longhaul/longhaul.h"

namespace longhaul_peer {

struct Flags {
  std::string master;  // host:port, required
  std::string secret;
  std::string tls_cert, tls_key, tls_ca;
  uint32_t group = 0;
  uint32_t connections = 1;
  std::string listen = "0.0.0.0:0";
  std::string advertise;  // empty: the address the master sees
  bool full_mesh = false;
  std::vector<size_t> tensor_sizes = {262144, 65536, 4097};  // f32 elements per state tensor
  lh_codec codec = LH_CODEC_NONE;
  lh_schedule schedule = LH_SCHEDULE_AUTO;
  uint32_t inflight = 2;  // all-reduces per tensor per step, all in flight at once
  // "step": a failed step is retried whole after update_topology; "batch": the step's
  // all-reduces run through lh_allreduce_batch (its own agreed retry, batch_attempts attempts).
  std::string retry = "step";
  uint32_t batch_attempts = 3;
  uint64_t steps = 0;  // 0: until stopped
  uint32_t step_delay_ms = 0;
  uint64_t seed = 1;
  uint32_t connect_timeout_ms = 60000;
  std::string log_level = "warn";
  bool help = false;
};

// The text --help prints.
std::string usage();

// Parses argv into *flags; on a bad flag returns false and sets *error to what to fix.
bool parse_flags(int argc, char** argv, Flags* flags, std::string* error);

}  // namespace longhaul_peer
