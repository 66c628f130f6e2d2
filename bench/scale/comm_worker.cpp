#include "comm_worker.hpp"

#include <time.h>

#include <chrono>

namespace longhaul::bench {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

lh_status CommWorker::create(const WorkerOptions& options, std::unique_ptr<CommWorker>* out,
                             std::string* error) {
  std::unique_ptr<CommWorker> w(new CommWorker());
  lh_comm_options co;
  lh_comm_options_init(&co);
  co.master_address = options.master.c_str();
  co.listen_address = "127.0.0.1:0";
  co.connections_per_link = 1;
  co.io_threads = options.io_threads;
  if (lh_status s = lh_comm_create(&co, &w->comm_); s != LH_OK) {
    *error = std::string("lh_comm_create: ") + lh_last_error();
    return s;
  }
  lh_comm_set_abort_callback(w->comm_, on_abort, w.get());
  // The same content on every communicator: a sync in steady state, which moves no tensor byte
  // and leaves the master's election and plans as the whole cost.
  w->tensor_.resize(options.state_floats);
  for (size_t i = 0; i < w->tensor_.size(); ++i) w->tensor_[i] = static_cast<float>(i % 7);
  lh_status s = lh_state_create(&w->state_);
  if (s == LH_OK)
    s = lh_state_add_tensor(w->state_, "theta", w->tensor_.data(), w->tensor_.size(), LH_DTYPE_F32);
  if (s != LH_OK) {
    *error = std::string("lh_state: ") + lh_last_error();
    return s;
  }
  w->allreduce_floats_ = options.allreduce_floats;
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  *out = std::move(w);
  return LH_OK;
}

CommWorker::~CommWorker() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (comm_) lh_comm_destroy(comm_);
  if (state_) lh_state_destroy(state_);
}

void CommWorker::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, nothing left
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    running_ = true;
    lock.unlock();
    task();
    task_done_ns_ = now_ns();
    lock.lock();
    running_ = false;
  }
}

void CommWorker::post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void CommWorker::serve_if_pending() {
  if (!serving_) return;
  {
    std::lock_guard lock(mu_);  // vanish() clears comm_ under it
    if (running_ || !tasks_.empty() || !comm_) return;
    int pending = 0;
    if (lh_comm_are_peers_pending(comm_, &pending) != LH_OK || !pending) return;
    tasks_.push_back([this] { update(); });
  }
  cv_.notify_one();
}

std::string CommWorker::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void CommWorker::fail(const char* what, lh_status s) {
  serving_ = false;  // a failed communicator is of no further use; stop polling it
  std::lock_guard lock(mu_);
  if (error_.empty())
    error_ = std::string(what) + ": " + lh_status_string(s) + ": " +
             (comm_ ? lh_comm_last_error(comm_) : "");
}

void CommWorker::note_epoch() {
  int64_t epoch = 0, world = 0;
  lh_comm_get_attribute(comm_, LH_ATTR_EPOCH, &epoch);
  lh_comm_get_attribute(comm_, LH_ATTR_GROUP_WORLD_SIZE, &world);
  if (epoch == epoch_) return;
  epoch_entered_ns_ = now_ns();
  world_ = world;
  epoch_ = epoch;  // last: a reader that sees the new epoch sees its world and time
}

void CommWorker::connect_at(uint64_t at_ns) {
  while (at_ns > now_ns()) std::this_thread::sleep_for(std::chrono::nanoseconds(at_ns - now_ns()));
  if (lh_status s = lh_comm_connect(comm_); s != LH_OK) return fail("lh_comm_connect", s);
  note_epoch();
  serving_ = true;
}

void CommWorker::update() {
  if (lh_status s = lh_comm_update_topology(comm_); s != LH_OK)
    return fail("lh_comm_update_topology", s);
  note_epoch();
}

void CommWorker::sync_state() {
  lh_sync_info info{};
  if (lh_status s = lh_sync_state(comm_, state_, LH_SYNC_ENFORCE_POPULAR, &info); s != LH_OK)
    return fail("lh_sync_state", s);
  revision_ = info.revision;
  state_rx_bytes_ = info.rx_bytes;
}

void CommWorker::allreduce() {
  std::vector<float> data(allreduce_floats_, 1.0f);
  lh_allreduce_options ro;
  lh_allreduce_options_init(&ro);
  if (lh_status s = lh_allreduce(comm_, data.data(), data.data(), data.size(), LH_DTYPE_F32,
                                 LH_OP_SUM, &ro, nullptr);
      s != LH_OK)
    return fail("lh_allreduce", s);
  bool ok = true;
  for (float v : data) ok = ok && v == static_cast<float>(world_.load());
  allreduce_ok_ = ok;
}

void CommWorker::leave() {
  serving_ = false;
  if (lh_status s = lh_comm_leave(comm_, "scale benchmark done"); s != LH_OK)
    fail("lh_comm_leave", s);
}

void CommWorker::vanish() {
  serving_ = false;
  lh_comm* comm = nullptr;
  {
    std::lock_guard lock(mu_);
    std::swap(comm, comm_);
  }
  lh_comm_destroy(comm);
}

void CommWorker::on_abort(void* self, uint64_t, lh_status status, const char*) {
  auto* w = static_cast<CommWorker*>(self);
  uint64_t none = 0;
  if (status == LH_ERR_PEER_LOST) w->lost_abort_ns_.compare_exchange_strong(none, now_ns());
}

}  // namespace longhaul::bench
