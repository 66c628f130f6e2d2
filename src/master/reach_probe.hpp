// The master's own look at a newcomer's advertised data address (issue 50, item 2): one TCP
// connection, no bytes sent, closed at once. It is the third party when the newcomer and a member
// that never completed a link of its own name each other unreachable: if the master reached the
// newcomer, the member's claim does not count (Membership::note_reached).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <asio/any_io_executor.hpp>

namespace longhaul::master {

// Connects to host:port; `done(true)` once connected, `done(false)` on failure or after
// `timeout`. `done` runs on `executor` (the master's strand), exactly once.
void probe_reachable(const asio::any_io_executor& executor, const std::string& host, uint16_t port,
                     std::chrono::milliseconds timeout, std::function<void(bool)> done);

}  // namespace longhaul::master
