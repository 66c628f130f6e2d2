#include "net/handshake_slots.hpp"

#include <algorithm>

#include "net/connection.hpp"

namespace longhaul::net {

uint64_t HandshakeSlots::take(const std::shared_ptr<Connection>& conn, const std::string& address,
                              Clock::time_point now) {
  MutexLock lock(mu_);
  if (!room_for_address_locked(address, now)) return 0;
  while (!slots_.empty() && slots_.size() >= max_total_) drop_front_locked();
  if (max_total_ == 0 || max_per_address_ == 0) return 0;
  const uint64_t id = next_id_++;
  slots_.push_back({id, conn, address, now});
  by_id_[id] = std::prev(slots_.end());
  ++per_address_[address];
  return id;
}

void HandshakeSlots::release(uint64_t id) {
  MutexLock lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  release_address_locked(it->second->address);
  slots_.erase(it->second);
  by_id_.erase(it);
}

bool HandshakeSlots::shed_oldest() {
  MutexLock lock(mu_);
  if (slots_.empty()) return false;
  drop_front_locked();
  return true;
}

bool HandshakeSlots::room_for_address_locked(const std::string& address, Clock::time_point now) {
  auto count = per_address_.find(address);
  if (count == per_address_.end() || count->second < max_per_address_) return true;
  // The list is oldest first, so the first slot of this address is its oldest.
  auto oldest = std::find_if(slots_.begin(), slots_.end(),
                             [&](const Slot& s) { return s.address == address; });
  if (oldest == slots_.end() || now - oldest->since < grace_) return false;
  drop_locked(oldest);
  return true;
}

void HandshakeSlots::drop_front_locked() {
  drop_locked(slots_.begin());
}

void HandshakeSlots::drop_locked(std::list<Slot>::iterator slot) {
  if (auto conn = slot->conn.lock()) conn->close();
  release_address_locked(slot->address);
  by_id_.erase(slot->id);
  slots_.erase(slot);
  ++shed_;
}

void HandshakeSlots::release_address_locked(const std::string& address) {
  auto it = per_address_.find(address);
  if (--it->second == 0) per_address_.erase(it);
}

size_t HandshakeSlots::size() const {
  MutexLock lock(mu_);
  return slots_.size();
}

uint64_t HandshakeSlots::shed_count() const {
  MutexLock lock(mu_);
  return shed_;
}

}  // namespace longhaul::net
