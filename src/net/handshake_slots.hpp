// The connections a listener has accepted but not yet authenticated, bounded in all and per
// source address, so that nobody without the secret can hold more of a process than the bounds
// allow (issue 24: descriptors, memory, handshake work).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "common/mutex.hpp"

namespace longhaul::net {

class Connection;

class HandshakeSlots {
 public:
  using Clock = std::chrono::steady_clock;

  // `grace`: how long a connection may sit in its handshake before a newcomer from its own
  // address, finding that address at its cap, may take its place.
  HandshakeSlots(size_t max_total, size_t max_per_address, std::chrono::milliseconds grace)
      : max_total_(max_total), max_per_address_(max_per_address), grace_(grace) {}

  // Takes a slot for `conn`, from `address`, and returns its id for release(). When that address
  // already holds max_per_address slots, its oldest connection gives way if it has been in its
  // handshake for `grace` (an honest handshake takes a few round trips, so a connection that old
  // is a silent one); otherwise the newcomer is refused (0) and the caller tells it why. When
  // every slot is taken, the oldest connection is closed to make room.
  uint64_t take(const std::shared_ptr<Connection>& conn, const std::string& address,
                Clock::time_point now = Clock::now());
  // The handshake ended (admitted, refused or timed out); unknown or shed ids are ignored.
  void release(uint64_t id);
  // Closes the oldest connection still in its handshake (when descriptors run out); false when
  // there was none.
  bool shed_oldest();

  size_t size() const;
  uint64_t shed_count() const;

 private:
  struct Slot {
    uint64_t id;
    std::weak_ptr<Connection> conn;
    std::string address;
    Clock::time_point since;
  };
  // Makes room for one more from `address`, shedding its oldest past the grace; false: none was.
  bool room_for_address_locked(const std::string& address, Clock::time_point now) REQUIRES(mu_);
  void drop_front_locked() REQUIRES(mu_);  // closes and forgets the oldest slot
  void drop_locked(std::list<Slot>::iterator slot) REQUIRES(mu_);  // closes and forgets one
  void release_address_locked(const std::string& address)
      REQUIRES(mu_);  // one slot fewer from `address`

  const size_t max_total_, max_per_address_;
  const std::chrono::milliseconds grace_;
  mutable Mutex mu_;
  std::list<Slot> slots_ GUARDED_BY(mu_);  // oldest first
  std::map<uint64_t, std::list<Slot>::iterator> by_id_ GUARDED_BY(mu_);
  std::map<std::string, size_t> per_address_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  uint64_t shed_ GUARDED_BY(mu_) = 0;
};

}  // namespace longhaul::net
