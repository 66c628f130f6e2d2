#include "master/master.hpp"

namespace longhaul::master {

Result<std::unique_ptr<Master>> Master::create(const MasterOptions& options, unsigned io_threads) {
  std::unique_ptr<Master> m(new Master());
  m->io_ = std::make_unique<runtime::IoRuntime>(io_threads ? io_threads : 2);
  auto server = MasterServer::create(*m->io_, options);
  if (!server) return server.status();
  m->server_ = std::move(*server);
  return m;
}

Master::~Master() {
  if (server_) server_->stop();
  server_.reset();
  io_.reset();
}

}  // namespace longhaul::master
