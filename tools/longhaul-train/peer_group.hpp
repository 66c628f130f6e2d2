// A peer's membership of its group, through the C API: the communicator (connected, and for an
// initial peer waiting until the whole group is there), stop requests, and the leave.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli_options.hpp"
#include "common/status.hpp"
#include "longhaul/longhaul.h"

namespace longhaul::train::cli {

// SIGTERM and SIGINT ask the training loop to finish its step and leave; a second one exits at
// once (the loop may be waiting for a peer that is gone).
void install_stop_handler();
bool stop_requested();

class PeerGroup {
 public:
  // Connects to the master. An initial peer then re-forms the ring until the group has --peers
  // members (they start together); a joiner (--join) is admitted where the group is.
  static Result<std::unique_ptr<PeerGroup>> join(const PeerOptions& p);
  ~PeerGroup();
  PeerGroup(const PeerGroup&) = delete;
  PeerGroup& operator=(const PeerGroup&) = delete;

  lh_comm* comm() { return comm_; }
  std::int64_t attribute(lh_attribute a);
  std::vector<std::uint64_t> ring();
  lh_traffic traffic();
  // The communicator's last error as a Status of `code`.
  Status error(lh_status code, const std::string& what) const;
  Status leave(const std::string& reason);

 private:
  explicit PeerGroup(lh_comm* comm) : comm_(comm) {}
  lh_comm* comm_;
};

// A collective failure the caller retries after re-forming the ring: a peer was lost, the group
// began reconfiguring, a state source stalled.
bool retryable(lh_status s);

}  // namespace longhaul::train::cli
