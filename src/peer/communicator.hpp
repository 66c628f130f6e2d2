// A peer's communicator: a PeerSession together with the I/O threads that drive it. This is the
// object the C API's lh_comm wraps.
#pragma once

#include <memory>

#include "net/io_runtime.hpp"
#include "peer/session.hpp"

namespace longhaul::peer {

class Communicator {
 public:
  // io_threads == 0 picks 2.
  static Result<std::unique_ptr<Communicator>> create(const CommunicatorOptions& options,
                                                      unsigned io_threads = 0);
  // Closes the session (without a graceful leave) and joins the I/O threads.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  PeerSession& session() { return *session_; }

 private:
  Communicator() = default;
  std::unique_ptr<net::IoRuntime> io_;
  std::shared_ptr<PeerSession> session_;
};

}  // namespace longhaul::peer
