// What the master remembers about members it evicted for misbehaving (a missed round deadline,
// link claims nobody confirmed), across their re-registrations: a registration from the same
// identity is refused for a back-off that doubles with each offence.
//
// Two keys are remembered. An identity is what a member registers with: its data address (host and
// port) and its node name; every offence bans it. Those are free to change, so offences that a
// party repeats by coming back under a new identity (a failed admission, claims nobody confirmed)
// count against its source address too (address_key, what the master sees the control connection
// come from), and the address is banned from its second such offence on: a zombie re-registering
// from a fresh port each time is refused after two rounds (issue 50, item 3). The first offence is
// free so that one honest mishap behind a shared address (a NAT) does not keep its neighbours out.
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

  // Offences of an address that start no back-off yet (see above).
  static constexpr uint32_t kFreeAddressOffences = 1;

  static std::string identity(const std::string& host, uint16_t port, const std::string& node);
  static std::string address_key(const std::string& source_host);

  // One more offence by `key` at `now`; returns the back-off it starts: none for the first `free`
  // offences remembered, then `base` doubling per offence up to `cap`.
  std::chrono::milliseconds record(const std::string& key, Clock::time_point now,
                                   uint32_t free = 0);
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
