#include "comm.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "engine.hpp"
#include "errors.hpp"

namespace nb = nanobind;

namespace longhaul::py {

// ----------------------------------------------------------------------------------- Master

Master::Master(const lh_master_options& options) {
  check(lh_master_create(&options, &master_));
  lh_status s = lh_master_run(master_);
  if (s == LH_OK) s = lh_master_port(master_, &port_);
  if (s != LH_OK) {
    const std::string message = lh_last_error();
    lh_master_destroy(master_);
    master_ = nullptr;
    raise_status(s, message.c_str());
  }
  std::string host = options.listen_address ? options.listen_address : "0.0.0.0:0";
  host = host.substr(0, host.rfind(':'));
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "[::]") host = "[::1]";
  address_ = host + ":" + std::to_string(port_);
}

Master::~Master() {
  nb::gil_scoped_release unlocked;
  lh_master_destroy(master_);
}

void Master::stop() {
  if (!master_) return;
  nb::gil_scoped_release unlocked;
  lh_master_destroy(master_);
  master_ = nullptr;
}

// ----------------------------------------------------------------------------- Communicator

Communicator::Communicator(const lh_comm_options& options)
    : node_(options.node ? options.node : ""),
      node_rail_(options.node_rail),
      node_rails_(options.node_rails),
      peer_group_(options.peer_group) {
  check(lh_comm_create(&options, &comm_));
  lh_comm_set_abort_callback(comm_, &Communicator::on_abort, this);
}

Communicator::~Communicator() {
  try {
    close(std::nullopt);
  } catch (...) {  // a destructor must not throw; close() only raises for a closed handle
  }
}

lh_comm* Communicator::handle() const {
  if (!comm_) raise_status(LH_ERR_CLOSED, "the communicator is closed");
  return comm_;
}

void Communicator::connect() {
  lh_comm* c = handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_comm_connect(c);
  }
  // connect's LH_ERR_PEER_LOST means the master was not reached (longhaul.h): no retry after
  // update_topology mends that, so it is not the retryable PeerFailure.
  if (s == LH_ERR_PEER_LOST) raise_master_unreachable(lh_comm_last_error(c));
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
}

void Communicator::update_topology() {
  lh_comm* c = handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_comm_update_topology(c);
  }
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
}

void Communicator::wait_for_peers(uint32_t n, std::optional<double> timeout) {
  if (timeout && !(*timeout >= 0)) throw nb::value_error("timeout must be None or >= 0 seconds");
  constexpr double kForever = 4294967295.0;  // UINT32_MAX ms: about 49 days
  const double ms = timeout ? std::min(*timeout * 1000.0, kForever) : kForever;
  lh_comm* c = handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_comm_wait_for_peers(c, n, static_cast<uint32_t>(ms));
  }
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
}

bool Communicator::peers_pending() const {
  int pending = 0;
  check(lh_comm_are_peers_pending(handle(), &pending));
  return pending != 0;
}

int64_t Communicator::attribute(lh_attribute a) const {
  int64_t v = 0;
  check(lh_comm_get_attribute(handle(), a, &v));
  return v;
}

std::vector<uint64_t> Communicator::ring() const {
  size_t n = 0;
  check(lh_comm_get_ring(handle(), nullptr, 0, &n));
  std::vector<uint64_t> ids(n);
  while (true) {
    check(lh_comm_get_ring(handle(), ids.data(), ids.size(), &n));
    if (n <= ids.size()) break;
    ids.resize(n);  // the ring grew between the two calls
  }
  ids.resize(n);
  return ids;
}

lh_traffic Communicator::traffic() const {
  lh_traffic t{};
  check(lh_comm_get_traffic(handle(), &t));
  return t;
}

void Communicator::close(std::optional<std::string> reason) {
  if (!comm_) return;
  while (!attachments_.empty()) attachments_.back()->destroy();  // detaches itself
  lh_comm* c = comm_;
  comm_ = nullptr;
  nb::gil_scoped_release unlocked;
  if (reason) lh_comm_leave(c, reason->c_str());
  lh_comm_destroy(c);
}

void Communicator::set_on_eviction(const std::string& mode) {
  if (mode != "raise" && mode != "exit")
    throw nb::value_error("on_eviction must be 'raise' or 'exit'");
  exit_on_eviction_ = mode == "exit";
}

std::optional<AbortRecord> Communicator::last_abort() const {
  std::lock_guard lock(abort_mu_);
  return last_abort_;
}

void Communicator::attach(Attachment* attachment) {
  attachments_.push_back(attachment);
}

void Communicator::detach(Attachment* attachment) {
  std::erase(attachments_, attachment);
}

// Runs on a library thread without the GIL: records, and in "exit" mode ends the process.
void Communicator::on_abort(void* user, uint64_t epoch, lh_status status, const char* reason) {
  auto* self = static_cast<Communicator*>(user);
  if (status == LH_ERR_NODE_EVICTED && self->exit_on_eviction_) {
    char line[1024];
    const int n = std::snprintf(line, sizeof line,
                                "longhaul: node '%s' evicted (%s); exiting with status 4 so that "
                                "no rank of this node hangs in an intra-node collective\n",
                                self->node_.c_str(), reason ? reason : "");
    if (n > 0) (void)!::write(STDERR_FILENO, line, std::min<size_t>(sizeof line - 1, n));
    std::_Exit(4);
  }
  std::lock_guard lock(self->abort_mu_);
  self->last_abort_ = AbortRecord{epoch, status, reason ? reason : ""};
}

// ------------------------------------------------------------------------------------- Work

Work::Work(lh_op* op, nb::object result, std::vector<nb::object> keep)
    : op_(op), result_(std::move(result)), keep_(std::move(keep)) {}

Work::~Work() {
  {
    nb::gil_scoped_release unlocked;
    if (!outcome_) (void)lh_op_cancel(op_);  // a no-op once the operation has completed
    lh_op_destroy(op_);  // waits for the operation: the buffers are in use until then
    if (waiter_thread_.joinable()) waiter_thread_.join();
  }
  keep_.clear();
}

void Work::finish(lh_status status) {
  if (outcome_) return;
  outcome_ = status;
  if (status != LH_OK) error_ = lh_op_last_error(op_);
  keep_.clear();  // done: the library no longer touches the tensors
}

nb::object Work::wait(std::optional<double> timeout) {
  if (!outcome_) {
    if (!timeout) {
      lh_status s;
      {
        nb::gil_scoped_release unlocked;
        s = lh_op_wait(op_);
      }
      finish(s);
    } else {
      if (!(*timeout >= 0)) throw nb::value_error("timeout must be >= 0 seconds or None");
      if (!waiter_) {
        waiter_ = std::make_shared<Waiter>();
        waiter_thread_ = std::thread([w = waiter_, op = op_] {
          const lh_status s = lh_op_wait(op);
          std::lock_guard lock(w->mu);
          w->status = s;
          w->done = true;
          w->cv.notify_all();
        });
      }
      bool done;
      lh_status s;
      {
        nb::gil_scoped_release unlocked;
        std::unique_lock lock(waiter_->mu);
        done = waiter_->cv.wait_for(lock, std::chrono::duration<double>(*timeout),
                                    [&] { return waiter_->done; });
        s = waiter_->status;
      }
      if (!done) raise_timeout("the all-reduce did not complete within the timeout");
      finish(s);
    }
  }
  if (*outcome_ != LH_OK) raise_status(*outcome_, error_.c_str());
  return result_;
}

void Work::cancel() {
  check(lh_op_cancel(op_));
}

bool Work::done() const {
  if (outcome_) return true;
  int d = 0;
  check(lh_op_test(op_, &d));
  return d != 0;
}

lh_op_info Work::info() const {
  lh_op_info i{};
  check(lh_op_get_info(op_, &i));
  return i;
}

}  // namespace longhaul::py
