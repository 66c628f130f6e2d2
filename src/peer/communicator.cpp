#include "peer/communicator.hpp"

namespace longhaul::peer {

Result<std::unique_ptr<Communicator>> Communicator::create(const CommunicatorOptions& options,
                                                           unsigned io_threads) {
  std::unique_ptr<Communicator> c(new Communicator());
  c->io_ = std::make_unique<net::IoRuntime>(io_threads ? io_threads : 2);
  auto session = PeerSession::create(*c->io_, options);
  if (!session) return session.status();
  c->session_ = std::move(*session);
  return c;
}

Communicator::~Communicator() {
  if (session_) session_->close();
  session_.reset();  // handlers still queued hold the last references until the runtime stops
  io_.reset();
}

}  // namespace longhaul::peer
