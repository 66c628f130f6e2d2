// A peer's communicator: a PeerSession, the I/O threads that drive it, and the collective engine
// that runs all-reduces over the session's links. This is the object the C API's lh_comm wraps.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "collective/engine.hpp"
#include "net/io_runtime.hpp"
#include "peer/session.hpp"

namespace longhaul::peer {

class Communicator {
 public:
  // io_threads == 0 picks 2.
  static Result<std::unique_ptr<Communicator>> create(const CommunicatorOptions& options,
                                                      unsigned io_threads = 0);
  // Closes the session (without a graceful leave), fails the collectives in flight, and joins the
  // I/O and worker threads.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  PeerSession& session() { return *session_; }
  collective::CollectiveEngine& collectives() { return *engine_; }

  // The committed epoch's ring as the collectives see it.
  collective::RingView ring_view() const;
  // Starts an all-reduce over the current epoch's ring (see collective::AllReduceSpec). Fails at
  // once with the session's failure when the communicator is unusable.
  Result<std::shared_ptr<collective::AllReduceOp>> allreduce(const collective::AllReduceSpec& spec);

  // One all-reduce of a batch: spec.input/output/count as in AllReduceSpec.
  struct BatchItem {
    const void* input = nullptr;
    void* output = nullptr;
    size_t count = 0;
  };
  // Runs every item with `spec`'s type, op and codec, all in flight at once, all or nothing. After
  // each attempt every member reports its outcome to the master, which decides for the whole
  // group (OK once every member succeeded; FAILED as soon as one failed or a member is lost, leaves
  // or waits in update_topology). On FAILED every member restores its inputs (and residual), calls
  // update_topology without admitting joiners, and retries on the new ring, up to max_attempts
  // attempts. Returns OK exactly when every member of the group returns OK, with the results; on
  // any error the inputs (and residual) are as they were on entry. See docs/collectives.md.
  Status allreduce_batch(const std::vector<BatchItem>& items, collective::AllReduceSpec spec,
                         uint32_t max_attempts);

  // The master's aborts fail every collective in flight first, then reach `handler` (which may
  // be empty). Runs on a library thread; must not block.
  void set_abort_handler(PeerSession::AbortHandler handler);

  // A per-communicator object of a layer above (the shared-state sync keeps its block server
  // here): the one stored under `key`, created by `make` on first use. It is destroyed before the
  // session and the I/O threads. Thread-safe.
  std::shared_ptr<void> attachment(const std::string& key,
                                   const std::function<std::shared_ptr<void>()>& make);

 private:
  Communicator() = default;
  // Starts every item's all-reduce and waits for all of them; the first failure.
  Status run_batch_attempt(const std::vector<BatchItem>& items,
                           const collective::AllReduceSpec& spec);
  std::unique_ptr<net::IoRuntime> io_;
  std::unique_ptr<runtime::WorkerPool> workers_;
  std::unique_ptr<collective::CollectiveEngine> engine_;
  std::shared_ptr<PeerSession> session_;
  std::mutex handler_mu_;
  PeerSession::AbortHandler user_abort_handler_;
  std::map<std::string, std::shared_ptr<void>> attachments_;  // guarded by handler_mu_
};

}  // namespace longhaul::peer
