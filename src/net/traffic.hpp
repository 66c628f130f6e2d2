// Byte counters for links: how much a set of links (one communicator's data links, its link to the
// master, its state-sync links) has written and read, frame headers included.
//
// A net::Link adds each frame it has written to or read from one of its connections (header and
// payload, as handed to or taken from the connection's stream: the socket for plaintext, the
// plaintext side of the TLS record layer for TLS) with one relaxed fetch_add. Totals therefore
// only grow; two reads of different fields are not a consistent cut of one moment.
//
// Ownership: shared. Whoever wants the totals creates a counter and hands a shared_ptr to every
// link that should count into it (Link::count_traffic); each link keeps it alive as long as it
// lives, so counts of links that closed stay in it. Thread-safe: any number of links and readers.
#pragma once

#include <atomic>
#include <cstdint>

namespace longhaul::net {

class TrafficCounter {
 public:
  void add_sent(uint64_t bytes) { sent_.fetch_add(bytes, std::memory_order_relaxed); }
  void add_received(uint64_t bytes) { received_.fetch_add(bytes, std::memory_order_relaxed); }
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }
  uint64_t received() const { return received_.load(std::memory_order_relaxed); }
  // Moves everything counted here into `to` (Link: what an inbound link carried before the layer
  // above said what it is for). Bytes added concurrently may stay behind; call again to move them.
  void move_into(TrafficCounter& to) {
    to.add_sent(sent_.exchange(0, std::memory_order_relaxed));
    to.add_received(received_.exchange(0, std::memory_order_relaxed));
  }

 private:
  // Apart, so that a link's writers (sent) and readers (received) on different cores do not
  // bounce one cache line between them.
  alignas(64) std::atomic<uint64_t> sent_{0};
  alignas(64) std::atomic<uint64_t> received_{0};
};

}  // namespace longhaul::net
