// Serves this peer's blocks to fetchers during a sync: answers STATE_FETCH on service links
// (Mesh::ServiceHandler) with the raw bytes straight from the tensor memory (one DATA op, striped
// over the link's connections), or with STATE_BLOCKS_Z for a compressed fetch.
//
// It serves only between begin() and end() of a sync; a fetch outside that window, or for blocks
// the registry does not have, is answered STATE_FETCH_FAILED and its link closed. end() closes the
// service links and returns once no send touches the tensors any more. So no service link
// outlives the sync it serves.
//
// Compression runs on the runtime's worker pool, only between begin() and end(): end() (which the
// destructor runs too) waits for every compression and send the server started. So the pool must
// outlive the server's serving, and the server must be destroyed before the pool (lh_comm
// destroys it before the runtime). Owned by a shared_ptr: sends and compressions in flight hold
// it too. Thread-safe.
//
// Every service link it is handed counts its frames, from its first one, into the traffic counter
// given at construction (the communicator's state traffic; null counts nothing).
#pragma once

#include <atomic>
#include <map>
#include <memory>

#include "common/mutex.hpp"
#include "net/link.hpp"
#include "net/traffic.hpp"
#include "runtime/worker_pool.hpp"
#include "state/registry.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::state {

class BlockServer : public std::enable_shared_from_this<BlockServer> {
 public:
  explicit BlockServer(runtime::WorkerPool& workers,
                       std::shared_ptr<net::TrafficCounter> traffic = nullptr);
  ~BlockServer();

  // Mesh::ServiceHandler.
  void on_service_message(const std::shared_ptr<net::Link>& link,
                          Result<wire::ControlMessage> message);

  // Fails if a sync is already being served (one lh_sync_state at a time per communicator).
  Status begin(const Registry& registry);
  // Stops serving; returns the tensor bytes sent since begin().
  uint64_t end();

 private:
  void serve(const std::shared_ptr<net::Link>& link, const wire::StateFetchMsg& fetch);
  void refuse(const std::shared_ptr<net::Link>& link, uint64_t request, Status why);
  void sent(uint64_t bytes, const Status& s);

  runtime::WorkerPool& workers_;  // compresses
  const std::shared_ptr<net::TrafficCounter> traffic_;
  Mutex mu_;
  CondVar idle_;
  const Registry* registry_ GUARDED_BY(mu_) = nullptr;  // serving while set
  std::map<const net::Link*, std::shared_ptr<net::Link>> links_ GUARDED_BY(mu_);
  size_t in_flight_ GUARDED_BY(mu_) = 0;  // sends and compressions started and not over
  uint64_t tx_bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace longhaul::state
