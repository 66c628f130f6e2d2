// longhaul-peer: a peer daemon that joins a longhaul run and loops a synthetic DiLoCo-shaped
// workload (all-reduce a pseudo-update, apply it, sync the shared state) until stopped.
// Written against the public C API only (longhaul.h). See --help and docs/churn.md.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/mutex.hpp"
#include "longhaul/longhaul.h"
#include "peer_flags.hpp"
#include "synthetic_workload.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using longhaul_peer::Flags;
using longhaul_peer::SyntheticWorkload;

// Lines go out whole and flushed: the churn supervisor parses them as they come.
longhaul::Mutex g_out_mu;
// Whether the EVICTED line is out: it goes out once, before the ERROR line (evicted()).
bool g_evicted_emitted GUARDED_BY(g_out_mu) = false;

void write_line(const std::string& line) REQUIRES(g_out_mu) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

void emit(const std::string& line) {
  longhaul::MutexLock lock(g_out_mu);
  write_line(line);
}

// Quotes a library message for a key="value" field.
std::string quoted(const char* message) {
  std::string out = "\"";
  for (const char* p = message; p && *p; ++p) out += (*p == '"' || *p == '\n') ? '\'' : *p;
  return out + "\"";
}

// The EVICTED line, once. The abort callback prints it; but the library fails the calls in flight
// before it runs the callback (the communicator's failure fails the blocked call, the state sync
// and the collectives first), so the call's LH_ERR_NODE_EVICTED can reach fail() first, and its
// _Exit would end the process before the callback's line: fail() prints it then.
void evicted(const char* reason) {
  longhaul::MutexLock lock(g_out_mu);
  if (g_evicted_emitted) return;
  g_evicted_emitted = true;
  write_line(fmt::format("EVICTED message={}", quoted(reason)));
}

// Exit status 4: the node was evicted (another of its ranks died or left), the expected end of
// a rank whose sibling is gone, after its EVICTED line; 1: any other error.
[[noreturn]] void fail(const char* what, lh_status s, const char* message) {
  if (s == LH_ERR_NODE_EVICTED) evicted(message);
  emit(fmt::format("ERROR what={} status={} message={}", what, lh_status_string(s),
                   quoted(message)));
  std::_Exit(s == LH_ERR_NODE_EVICTED ? 4 : 1);
}

// The abort callback: only the node's eviction is reported (the other aborts show as RETRY).
void on_abort(void*, uint64_t, lh_status status, const char* reason) {
  if (status == LH_ERR_NODE_EVICTED) evicted(reason);
}

// Stop requests: the first SIGTERM/SIGINT asks the loop to leave after the current step, a
// second one exits at once (the loop may be waiting on a peer that is gone).
struct StopRequest {
  std::atomic<bool> requested{false};
  longhaul::Mutex mu;
  longhaul::CondVar cv;
};

// Never destroyed: the detached signal thread may be notifying it while main returns and exit
// runs the static destructors (ThreadSanitizer caught the condition variable destroyed under a
// broadcast).
StopRequest& stop_request() {
  static auto* const stop = new StopRequest;
  return *stop;
}

bool stop_requested() {
  return stop_request().requested.load();
}

void watch_signals(sigset_t signals) {
  StopRequest& stop = stop_request();
  for (int received = 0;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (++received > 1) std::_Exit(128 + sig);
    {
      longhaul::MutexLock lock(stop.mu);
      stop.requested = true;
    }
    stop.cv.notify_all();
  }
}

// Sleeps up to `ms`, waking early on a stop request.
void pause_between_steps(uint32_t ms) {
  if (ms == 0) return;
  StopRequest& stop = stop_request();
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  longhaul::MutexLock lock(stop.mu);
  while (!stop.requested.load())
    if (!stop.cv.wait_until(stop.mu, deadline)) return;
}

int64_t attribute(lh_comm* comm, lh_attribute a) {
  int64_t v = 0;
  if (lh_status s = lh_comm_get_attribute(comm, a, &v); s != LH_OK)
    fail("lh_comm_get_attribute", s, lh_comm_last_error(comm));
  return v;
}

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool retryable_collective(lh_status s) {
  return s == LH_ERR_PEER_LOST || s == LH_ERR_ABORTED;
}
bool retryable_sync(lh_status s) {
  return s == LH_ERR_PEER_LOST || s == LH_ERR_ABORTED || s == LH_ERR_TIMEOUT;
}

// Starts every slice's all-reduce, so all are in flight together, and waits for all of them. The
// first failure wins; its message goes to *message.
lh_status allreduce_step(lh_comm* comm, const SyntheticWorkload& work,
                         const lh_allreduce_options& options, std::string* message) {
  std::vector<lh_op*> ops;
  lh_status result = LH_OK;
  for (const auto& slice : work.slices()) {
    lh_op* op = nullptr;
    lh_status s = lh_allreduce_async(comm, slice.send, slice.recv, slice.count, LH_DTYPE_F32,
                                     LH_OP_AVG, &options, &op);
    if (s != LH_OK) {
      result = s;
      *message = lh_comm_last_error(comm);
      break;
    }
    ops.push_back(op);
  }
  for (lh_op* op : ops) {
    lh_status s = lh_op_wait(op);
    if (s != LH_OK && result == LH_OK) {
      result = s;
      *message = lh_op_last_error(op);
    }
    lh_op_destroy(op);
  }
  return result;
}

// The same all-reduces through lh_allreduce_batch: all in flight at once, retried on the new ring
// (after its own update_topology) until every peer of an attempt succeeded.
lh_status allreduce_batch_step(lh_comm* comm, const SyntheticWorkload& work,
                               const lh_allreduce_options& options, uint32_t attempts,
                               std::string* message) {
  std::vector<const void*> sends;
  std::vector<void*> recvs;
  std::vector<size_t> counts;
  for (const auto& slice : work.slices()) {
    sends.push_back(slice.send);
    recvs.push_back(slice.recv);
    counts.push_back(slice.count);
  }
  lh_status s = lh_allreduce_batch(comm, sends.data(), recvs.data(), counts.data(), counts.size(),
                                   LH_DTYPE_F32, LH_OP_AVG, &options, attempts);
  if (s != LH_OK) *message = lh_comm_last_error(comm);
  return s;
}

lh_comm* connect(const Flags& f) {
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = f.master.c_str();
  if (!f.node.empty()) {
    o.node = f.node.c_str();
    o.node_rail = f.rail;
    o.node_rails = f.rails;
  }
  if (f.group_given || !f.node.empty()) o.peer_group = f.group;
  o.connections_per_link = f.connections;
  o.secret = f.secret.empty() ? nullptr : f.secret.c_str();
  o.use_tls = f.tls_cert.empty() ? 0 : 1;
  o.tls_cert_file = f.tls_cert.empty() ? nullptr : f.tls_cert.c_str();
  o.tls_key_file = f.tls_key.empty() ? nullptr : f.tls_key.c_str();
  o.tls_ca_file = f.tls_ca.empty() ? nullptr : f.tls_ca.c_str();
  o.listen_address = f.listen.c_str();
  o.advertised_address = f.advertise.empty() ? nullptr : f.advertise.c_str();
  o.connect_timeout_ms = f.connect_timeout_ms;
  o.full_mesh = f.full_mesh ? 1 : 0;
  lh_comm* comm = nullptr;
  if (lh_status s = lh_comm_create(&o, &comm); s != LH_OK)
    fail("lh_comm_create", s, lh_last_error());
  lh_comm_set_abort_callback(comm, on_abort, nullptr);
  // Printed before joining: a forward to this port (an emulated WAN, a NAT rule) must exist before
  // the neighbours dial the advertised address.
  emit(fmt::format("LISTEN port={}", attribute(comm, LH_ATTR_LISTEN_PORT)));
  if (lh_status s = lh_comm_connect(comm); s != LH_OK)
    fail("lh_comm_connect", s, lh_comm_last_error(comm));
  emit(fmt::format("JOINED id={} epoch={} world={}", attribute(comm, LH_ATTR_PEER_ID),
                   attribute(comm, LH_ATTR_EPOCH), attribute(comm, LH_ATTR_GROUP_WORLD_SIZE)));
  return comm;
}

// Block the stop signals before any thread starts (the library's threads inherit the mask); one
// thread waits for them.
void watch_stop_signals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  std::thread(watch_signals, stop_signals).detach();
}

// The workload's tensors as shared state.
lh_state* make_state(SyntheticWorkload& work) {
  lh_state* state = nullptr;
  if (lh_status s = lh_state_create(&state); s != LH_OK)
    fail("lh_state_create", s, lh_last_error());
  if (lh_status s = work.register_state(state); s != LH_OK)
    fail("lh_state_add_tensor", s, lh_state_last_error(state));
  return state;
}

// The peer's steps until stopped or done: re-form the ring when needed, all-reduce the update,
// apply it, sync the shared state, report the step. A retryable failure re-forms the ring and
// runs the step again; any other ends the process (fail()).
class PeerLoop {
 public:
  PeerLoop(const Flags& flags, lh_comm* comm, lh_state* state, SyntheticWorkload& work)
      : flags_(flags), comm_(comm), state_(state), work_(work) {
    lh_allreduce_options_init(&ar_);
    ar_.codec = flags.codec;
    ar_.schedule = flags.schedule;
    peer_id_ = static_cast<uint64_t>(attribute(comm, LH_ATTR_PEER_ID));
    // A newcomer's state is not the group's: its first successful sync only receives, unless it
    // is the group's first peer (then its initial state is the group's).
    fresh_ = attribute(comm, LH_ATTR_GROUP_WORLD_SIZE) > 1;
    epoch_ = attribute(comm, LH_ATTR_EPOCH);
  }

  // Returns the steps completed.
  uint64_t run() {
    while (!stop_requested() && (flags_.steps == 0 || completed_ < flags_.steps)) {
      const Reconfigured r = reconfigure();
      if (r == Reconfigured::kNewEpoch) continue;
      if (r == Reconfigured::kStopped) break;
      uint64_t step = 0;  // the group's step is the revision of its state: the syncs so far
      if (lh_status s = lh_state_get_revision(state_, &step); s != LH_OK)
        fail("lh_state_get_revision", s, lh_state_last_error(state_));
      int64_t ar_ms = 0, sync_ms = 0;
      if (!allreduce(step, &ar_ms)) continue;
      if (work_.gather_bytes() > 0 && !allgather(step)) continue;
      if (!flags_.fault_drop_updates) work_.apply();
      lh_sync_info info{};
      if (!sync(step, &info, &sync_ms)) continue;
      fresh_ = false;
      ++completed_;
      report(info, ar_ms, sync_ms);
      pause_between_steps(flags_.step_delay_ms);
    }
    return completed_;
  }

 private:
  enum class Reconfigured { kNo, kNewEpoch, kStopped };

  // Calls update_topology when a peer waits or a collective failed. kNewEpoch: a new epoch began
  // (check again, as a newcomer does right after joining: more peers may wait already).
  Reconfigured reconfigure() {
    int pending = 0;
    if (lh_status s = lh_comm_are_peers_pending(comm_, &pending); s != LH_OK)
      fail("lh_comm_are_peers_pending", s, lh_comm_last_error(comm_));
    if (!pending && !must_update_) return Reconfigured::kNo;
    if (lh_status s = lh_comm_update_topology(comm_); s != LH_OK)
      fail("lh_comm_update_topology", s, lh_comm_last_error(comm_));
    must_update_ = false;
    if (int64_t e = attribute(comm_, LH_ATTR_EPOCH); e != epoch_) {
      epoch_ = e;
      emit(
          fmt::format("TOPOLOGY epoch={} world={}", e, attribute(comm_, LH_ATTR_GROUP_WORLD_SIZE)));
      return Reconfigured::kNewEpoch;
    }
    return stop_requested() ? Reconfigured::kStopped : Reconfigured::kNo;
  }

  // The step's all-reduce; false (after a RETRY line) when it must run again on a new ring.
  bool allreduce(uint64_t step, int64_t* ms) {
    const auto t0 = Clock::now();
    work_.make_update(step, peer_id_);
    std::string message;
    lh_status s = flags_.retry == "batch"
                      ? allreduce_batch_step(comm_, work_, ar_, flags_.batch_attempts, &message)
                      : allreduce_step(comm_, work_, ar_, &message);
    *ms = ms_since(t0);
    if (s == LH_OK) return true;
    if (!retryable_collective(s))
      fail(flags_.retry == "batch" ? "lh_allreduce_batch" : "lh_allreduce_async", s,
           message.c_str());
    emit(fmt::format("RETRY step={} phase=allreduce status={} message={}", step,
                     lh_status_string(s), quoted(message.c_str())));
    must_update_ = true;
    return false;
  }

  // The step's all-gather of every peer's record; false (after a RETRY line) when the step must
  // run again. Records that are not the ring's peers' end the process: a violation.
  bool allgather(uint64_t step) {
    std::vector<uint64_t> ring(static_cast<size_t>(attribute(comm_, LH_ATTR_GROUP_WORLD_SIZE)));
    size_t members = 0;
    if (lh_status s = lh_comm_get_ring(comm_, ring.data(), ring.size(), &members); s != LH_OK)
      fail("lh_comm_get_ring", s, lh_comm_last_error(comm_));
    ring.resize(std::min(members, ring.size()));
    const auto& mine = work_.record(step, peer_id_);
    auto& all = work_.gathered_for(ring.size());
    lh_allreduce_options plain;  // the records are bytes: no codec
    lh_allreduce_options_init(&plain);
    plain.schedule = flags_.schedule;
    lh_status s = lh_allgather(comm_, mine.data(), mine.size(), all.data(), nullptr, LH_DTYPE_U8,
                               &plain, nullptr);
    if (s == LH_OK) {
      if (!work_.check_and_fold(ring))
        fail("lh_allgather", LH_ERR_INTERNAL, "the gathered records are not the ring's peers'");
      return true;
    }
    if (!retryable_collective(s)) fail("lh_allgather", s, lh_comm_last_error(comm_));
    emit(fmt::format("RETRY step={} phase=allgather status={} message={}", step,
                     lh_status_string(s), quoted(lh_comm_last_error(comm_))));
    must_update_ = true;
    return false;
  }

  // The step's state sync; false (after a RETRY line) when the step must run again.
  bool sync(uint64_t step, lh_sync_info* info, int64_t* ms) {
    const auto t1 = Clock::now();
    lh_status s =
        lh_sync_state(comm_, state_, fresh_ ? LH_SYNC_RECEIVE_ONLY : LH_SYNC_ENFORCE_POPULAR, info);
    *ms = ms_since(t1);
    if (s == LH_OK) return true;
    if (fresh_ && s == LH_ERR_STATE_MISMATCH) {
      // Every peer left was a newcomer (the peers that held the state are gone): nobody can serve
      // the group's state, so the newcomers' own (identical: same initial state, same updates)
      // state becomes the group's.
      emit(fmt::format("RETRY step={} phase=sync status={} message={}", step, lh_status_string(s),
                       quoted(lh_comm_last_error(comm_))));
      fresh_ = false;
      return false;
    }
    if (!retryable_sync(s)) fail("lh_sync_state", s, lh_comm_last_error(comm_));
    emit(fmt::format("RETRY step={} phase=sync status={} message={}", step, lh_status_string(s),
                     quoted(lh_comm_last_error(comm_))));
    must_update_ = true;
    return false;
  }

  void report(const lh_sync_info& info, int64_t ar_ms, int64_t sync_ms) {
    uint64_t hash = 0;
    if (lh_status h = lh_state_hash(state_, &hash); h != LH_OK)
      fail("lh_state_hash", h, lh_state_last_error(state_));
    emit(fmt::format(
        "STEP step={} rev={} hash={:016x} world={} epoch={} id={} ar_ms={} sync_ms={} rx={} "
        "tx={} fetched={} aborts={} applied={}",
        info.revision - 1, info.revision, hash, attribute(comm_, LH_ATTR_GROUP_WORLD_SIZE), epoch_,
        peer_id_, ar_ms, sync_ms, info.rx_bytes, info.tx_bytes, info.blocks_fetched,
        attribute(comm_, LH_ATTR_ABORT_COUNT), work_.applied()));
  }

  const Flags& flags_;
  lh_comm* const comm_;
  lh_state* const state_;
  SyntheticWorkload& work_;
  lh_allreduce_options ar_;
  uint64_t peer_id_ = 0;
  bool fresh_ = false;
  bool must_update_ = false;  // a collective failed: re-form the ring before retrying
  uint64_t completed_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (auto exit_status = longhaul_peer::parse_flags(argc, argv, &flags)) return *exit_status;
  // The library reads its log format from the environment at its first log line.
  if (!flags.log_format.empty()) ::setenv("LONGHAUL_LOG_FORMAT", flags.log_format.c_str(), 1);
  if (lh_status s = lh_set_log_level(flags.log_level.c_str()); s != LH_OK) {
    std::fprintf(stderr, "longhaul-peer: --log-level: %s\n", lh_last_error());
    return 2;
  }
  watch_stop_signals();
  SyntheticWorkload work(flags.tensor_sizes, flags.inflight, flags.seed, flags.allgather_bytes);
  lh_state* state = make_state(work);
  lh_comm* comm = connect(flags);
  const uint64_t completed = PeerLoop(flags, comm, state, work).run();

  const char* reason = stop_requested() ? "stopped by a signal" : "completed its steps";
  if (lh_status s = lh_comm_leave(comm, reason); s != LH_OK)
    fail("lh_comm_leave", s, lh_comm_last_error(comm));
  emit(fmt::format("LEFT reason={} steps={}", quoted(reason), completed));
  lh_comm_destroy(comm);
  lh_state_destroy(state);
  return 0;
}
