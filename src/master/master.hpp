// The master as one object: a MasterServer together with the I/O threads that drive it. This is
// what the C API's lh_master and the longhaul-master daemon use.
#pragma once

#include <memory>

#include "master/server.hpp"
#include "runtime/io_runtime.hpp"

namespace longhaul::master {

class Master {
 public:
  // Binds the listen address. io_threads == 0 picks 2.
  static Result<std::unique_ptr<Master>> create(const MasterOptions& options,
                                                unsigned io_threads = 0);
  // Stops the master if it runs and joins the I/O threads.
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Starts accepting peers and returns at once.
  void run() { server_->start(); }
  // Disconnects every peer and stops accepting. Idempotent.
  void stop() { server_->stop(); }
  uint16_t port() const { return server_->port(); }
  MasterSnapshot snapshot() { return server_->snapshot(); }
  // The run as last published for the status page (MasterServer::status). Never blocks.
  std::shared_ptr<const RunStatus> status() const { return server_->status(); }

 private:
  Master() = default;
  std::unique_ptr<runtime::IoRuntime> io_;
  std::shared_ptr<MasterServer> server_;
};

}  // namespace longhaul::master
