// What the master remembers about members it evicted for misbehaving (a missed round deadline,
// link claims nobody confirmed), across their re-registrations: a registration from the same
// identity is refused for a back-off that doubles with each offence.
//
// An identity is what a member registers with: its data address (host and port) and its node
// name. A party that changes its data port between registrations is a new identity; what bounds
// it then is each round's deadline (docs/security.md).
//
// Pure logic with the time passed in; the master's strand is its only caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace longhaul::master {

class Penalties {
 public:
  using Clock = std::chrono::steady_clock;
  // Identities remembered at most; past it the one whose back-off ended first is forgotten.
  static constexpr size_t kMaxRemembered = 4096;

  // `base`: the first offence's back-off (0: nothing is remembered); `cap`: the longest.
  Penalties(std::chrono::milliseconds base, std::chrono::milliseconds cap)
      : base_(base), cap_(cap) {}

  static std::string identity(const std::string& host, uint16_t port, const std::string& node);

  // One more offence by `identity` at `now`; returns the back-off it starts.
  std::chrono::milliseconds record(const std::string& identity, Clock::time_point now);
  // How much longer registrations from `identity` are refused (zero: they are not).
  std::chrono::milliseconds refused_for(const std::string& identity, Clock::time_point now) const;
  // Offences remembered for `identity`.
  uint32_t offences(const std::string& identity) const;

 private:
  struct Record {
    uint32_t offences = 0;
    Clock::time_point until;
  };
  void forget_old(Clock::time_point now);

  std::chrono::milliseconds base_, cap_;
  std::map<std::string, Record> records_;
};

}  // namespace longhaul::master
