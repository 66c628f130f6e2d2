// The Python classes over lh_master, lh_comm and lh_op.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nanobind/nanobind.h>

#include "longhaul/longhaul.h"

namespace longhaul::py {

// Something started on a communicator that must end before the communicator does (a SyncEngine,
// a LocalGroup): Communicator.close() destroys every attachment first.
class Attachment {
 public:
  // Frees the library object and detaches itself; later calls on it raise Closed. Idempotent.
  virtual void destroy() = 0;

 protected:
  ~Attachment() = default;
};

// longhaul.Master: an in-process master, serving from construction until stop()/close().
class Master {
 public:
  explicit Master(const lh_master_options& options);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  uint16_t port() const { return port_; }
  // "127.0.0.1:PORT" when listening on every interface, else "HOST:PORT".
  const std::string& address() const { return address_; }
  void stop();

 private:
  lh_master* master_ = nullptr;
  uint16_t port_ = 0;
  std::string address_;
};

// What the abort callback saw last; read by Python (Communicator.last_abort).
struct AbortRecord {
  uint64_t epoch = 0;
  lh_status status = LH_OK;
  std::string reason;
};

// longhaul.Communicator over one lh_comm.
class Communicator {
 public:
  explicit Communicator(const lh_comm_options& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // The handle, or Closed raised when close() ran.
  lh_comm* handle() const;
  void connect();
  void update_topology();
  // lh_comm_wait_for_peers, the GIL released; `timeout` in seconds (None: no deadline).
  void wait_for_peers(uint32_t n, std::optional<double> timeout);
  bool peers_pending() const;
  int64_t attribute(lh_attribute a) const;
  std::vector<uint64_t> ring() const;
  lh_traffic traffic() const;
  void close(std::optional<std::string> reason);
  bool closed() const { return comm_ == nullptr; }

  // "raise" (the default) or "exit": on LH_ERR_NODE_EVICTED the process exits at once with
  // status 4 after a message on stderr, so that sibling ranks blocked in intra-node collectives
  // are released (their peers' sockets close).
  void set_on_eviction(const std::string& mode);
  std::string on_eviction() const { return exit_on_eviction_ ? "exit" : "raise"; }
  std::optional<AbortRecord> last_abort() const;

  const std::string& node() const { return node_; }
  uint32_t node_rail() const { return node_rail_; }
  uint32_t node_rails() const { return node_rails_; }
  uint32_t peer_group() const { return peer_group_; }

  // Attachments started on this communicator: destroyed before the communicator is.
  void attach(Attachment* attachment);
  void detach(Attachment* attachment);

 private:
  static void on_abort(void* self, uint64_t epoch, lh_status status, const char* reason);

  lh_comm* comm_ = nullptr;
  std::string node_;
  uint32_t node_rail_ = 0, node_rails_ = 1, peer_group_ = 0;
  std::atomic<bool> exit_on_eviction_{false};
  mutable std::mutex abort_mu_;
  std::optional<AbortRecord> last_abort_;  // guarded by abort_mu_
  std::vector<Attachment*> attachments_;
};

// longhaul.Work: one all-reduce in flight. Holds the tensors until the operation is done;
// deleting one that has not completed cancels its operation first, so that a dropped Work (after
// a wait that timed out, at interpreter exit) never waits for peers that may never come.
class Work {
 public:
  Work(lh_op* op, nanobind::object result, std::vector<nanobind::object> keep);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks (GIL released) until done or `timeout` seconds passed (longhaul.Timeout; the
  // operation goes on). Returns the result tensor; raises the operation's error.
  nanobind::object wait(std::optional<double> timeout);
  // Fails the operation for the group unless it has completed (lh_op_cancel); never blocks.
  void cancel();
  bool done() const;
  lh_op_info info() const;

 private:
  void finish(lh_status status);

  lh_op* op_;
  nanobind::object result_;
  std::vector<nanobind::object> keep_;
  // A helper thread waits for a timed wait() (lh_op_wait has no deadline); started once.
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    lh_status status = LH_OK;
  };
  std::shared_ptr<Waiter> waiter_;
  std::thread waiter_thread_;
  std::optional<lh_status> outcome_;
  std::string error_;
};

}  // namespace longhaul::py
