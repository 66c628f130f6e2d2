// Command line of longhaul-peer: every flag and its default (the help text is built from these).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "longhaul/longhaul.h"

namespace longhaul_peer {

struct Flags {
  std::string master;  // host:port, required
  std::string secret;
  std::string secret_file;  // read into `secret` once the flags are parsed
  bool allow_weak_secret = false;
  std::string tls_cert, tls_key, tls_ca;
  uint32_t group = 0;
  bool group_given = false;  // --group was on the command line (else: the rail, or the default)
  // The node this rank belongs to (empty: the launcher's environment, else a node of one rail).
  std::string node;
  uint32_t rail = 0;
  uint32_t rails = 1;
  uint32_t connections = 1;
  std::string listen = "0.0.0.0:0";
  std::string advertise;  // empty: the address the master sees
  bool full_mesh = false;
  std::vector<size_t> tensor_sizes = {262144, 65536, 4097};  // f32 elements per state tensor
  lh_codec codec = LH_CODEC_NONE;
  lh_schedule schedule = LH_SCHEDULE_AUTO;
  uint32_t inflight = 2;         // all-reduces per tensor per step, all in flight at once
  uint32_t allgather_bytes = 0;  // per peer and step; 0: no all-gather
  // "step": a failed step is retried whole after update_topology; "batch": the step's
  // all-reduces run through lh_allreduce_batch (its own agreed retry, batch_attempts attempts).
  std::string retry = "step";
  uint32_t batch_attempts = 3;
  uint64_t steps = 0;  // 0: until stopped
  uint32_t step_delay_ms = 0;
  uint64_t seed = 1;
  // Test hook for longhaul-churn's progress check: every step runs its all-reduces and its sync,
  // but the averaged update is neither applied nor counted, on every member alike (so the state
  // hashes agree): a group that trains nothing.
  bool fault_drop_updates = false;
  uint32_t connect_timeout_ms = 60000;
  std::string log_level = "warn";
  std::string log_format;  // empty: LONGHAUL_LOG_FORMAT or text
};

// Parses argv into *flags. Returns the exit status when the program must stop now: 0 after
// --help, 2 after a bad flag (one line on stderr says which and why).
std::optional<int> parse_flags(int argc, char** argv, Flags* flags);

}  // namespace longhaul_peer
