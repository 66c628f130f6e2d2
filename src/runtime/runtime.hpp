// The runtime a communicator's services share: the I/O threads that drive every socket and timer,
// and the one worker pool that reduces, encodes, hashes and compresses. One object owns both and
// is handed to the collective engine, the state fetcher and the block server (and to later layers:
// the sync engine, GPU staging); none of them starts threads of its own.
//
// Lifetime: every service handed the runtime must be destroyed before it. Thread-safe.
#pragma once

#include "runtime/io_runtime.hpp"
#include "runtime/worker_pool.hpp"

namespace longhaul::runtime {

struct RuntimeOptions {
  // I/O threads; 0 picks 2 (a communicator's sockets are few, and completions are cheap).
  unsigned io_threads = 0;
  // Worker threads; 0 sizes the pool to the machine.
  unsigned workers = 0;
};

class Runtime {
 public:
  explicit Runtime(const RuntimeOptions& options = {});
  // Joins the workers first (their tasks may still post I/O), then the I/O threads.
  ~Runtime() = default;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  runtime::IoRuntime& io() { return io_; }
  WorkerPool& workers() { return workers_; }

 private:
  runtime::IoRuntime io_;  // declared first: destroyed after the workers
  WorkerPool workers_;
};

}  // namespace longhaul::runtime
