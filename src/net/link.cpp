#include "net/link.hpp"

#include <algorithm>
#include <cstring>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>
#include <fmt/format.h>

#include "common/log.hpp"
#include "net/handshake.hpp"
#include "net/link_ops.hpp"

namespace longhaul::net {

namespace {
constexpr size_t kMaxRememberedCancels = 1 << 16;
// Operation-wide cancels are few (one per failed collective); the newest are enough to discard
// late bytes, because op ids are never reused.
constexpr size_t kMaxRememberedPrefixes = 4096;
}

Status cap_link_rate(const std::vector<std::shared_ptr<Connection>>& connections,
                     uint64_t link_bytes_per_s) {
  if (link_bytes_per_s == 0 || connections.empty()) return Status::ok();
  const uint64_t each = std::max<uint64_t>(1, link_bytes_per_s / connections.size());
  for (const auto& c : connections) LH_RETURN_IF_ERROR(c->cap_send_rate(each));
  return Status::ok();
}

std::shared_ptr<Link> Link::create(std::vector<std::shared_ptr<Connection>> connections,
                                   const TransportOptions& options, std::string peer) {
  return std::shared_ptr<Link>(new Link(std::move(connections), options, std::move(peer)));
}

Link::Link(std::vector<std::shared_ptr<Connection>> connections, const TransportOptions& options,
           std::string peer)
    : options_(options),
      peer_(std::move(peer)),
      connections_(std::move(connections)),
      max_unexpected_bytes_(options.max_unexpected_bytes),
      max_control_bytes_(options.limits.max_control_payload) {
  for (auto& c : connections_) {
    writer_wake_.push_back(std::make_unique<asio::steady_timer>(c->strand(), asio::steady_timer::time_point::max()));
    reader_park_.push_back(std::make_unique<asio::steady_timer>(c->strand(), asio::steady_timer::time_point::max()));
  }
  frame_queues_.resize(connections_.size());
}

Link::~Link() {
  for (auto& c : connections_) c->close();
  // No reader or writer runs any more: what raced with count_traffic's move reaches the counter.
  if (traffic_owner_) uncounted_.move_into(*traffic_owner_);
}

void Link::count_traffic(std::shared_ptr<TrafficCounter> counter) {
  if (!counter) return;
  MutexLock lock(mu_);
  if (traffic_owner_) return;
  traffic_owner_ = std::move(counter);
  traffic_.store(traffic_owner_.get(), std::memory_order_release);
  // A frame whose count loaded the old pointer before the store may still land in uncounted_; the
  // destructor moves those.
  uncounted_.move_into(*traffic_owner_);
}

void Link::start(ControlHandler on_control, FailureHandler on_failure) {
  {
    MutexLock lock(mu_);
    if (started_) return;
    started_ = true;
    on_control_ = std::move(on_control);
    on_failure_ = std::move(on_failure);
  }
  for (size_t i = 0; i < connections_.size(); ++i) {
    auto self = shared_from_this();
    asio::co_spawn(connections_[i]->strand(), [self, i]() { return self->reader(i); }, asio::detached);
    asio::co_spawn(connections_[i]->strand(), [self, i]() { return self->writer(i); }, asio::detached);
  }
}

Status Link::failure() const {
  MutexLock lock(mu_);
  return failure_;
}

TcpStats Link::tcp_stats() const {
  TcpStats total;
  if (!failure()) return total;
  for (const auto& connection : connections_) connection->add_tcp_stats(&total);
  return total;
}

size_t Link::unexpected_segments() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [id, u] : unexpected_) n += u.segments.size();
  return n;
}

void Link::set_max_control_bytes(uint32_t bytes) {
  max_control_bytes_.store(std::min(bytes, options_.limits.max_control_payload),
                           std::memory_order_relaxed);
}

void Link::set_max_unexpected_bytes(uint64_t bytes) {
  {
    MutexLock lock(mu_);
    max_unexpected_bytes_ = bytes;
  }
  wake_parked_readers();
}

void Link::send(uint64_t op_id, std::span<const std::byte> data, Completion done) {
  {
    Pending pending;
    MutexLock lock(mu_);
    if (!failure_.is_ok()) {
      pending.add(std::move(done), failure_);
      return;
    }
    if (sends_.contains(op_id)) {
      pending.add(std::move(done), invalid_argument(fmt::format("op {} is already in use on this link", op_id)));
      return;
    }
    if (is_cancelled(op_id)) {
      pending.add(std::move(done), cancelled_reason(op_id));
      return;
    }
    auto op = std::make_shared<SendOp>();
    op->id = op_id;
    op->data = data;
    op->done = std::move(done);
    sends_[op_id] = op;
    send_queue_.push_back(std::move(op));
  }
  wake_writers();
}

void Link::recv(uint64_t op_id, std::span<std::byte> dst, Completion done) {
  {
    Pending pending;
    MutexLock lock(mu_);
    if (!failure_.is_ok()) {
      pending.add(std::move(done), failure_);
      return;
    }
    if (recvs_.contains(op_id)) {
      pending.add(std::move(done), invalid_argument(fmt::format("op {} already has a receive posted", op_id)));
      return;
    }
    if (is_cancelled(op_id)) {
      pending.add(std::move(done), cancelled_reason(op_id));
      return;
    }
    auto op = std::make_shared<RecvOp>();
    op->id = op_id;
    op->dst = dst;
    op->done = std::move(done);
    recvs_[op_id] = op;
    if (auto it = unexpected_.find(op_id); it != unexpected_.end()) {
      Unexpected early = std::move(it->second);
      unexpected_.erase(it);
      for (auto& [offset, bytes] : early.segments) unexpected_bytes_ -= unexpected_cost(bytes.size());
      if (early.total != dst.size()) {
        op->status = protocol_error(fmt::format("op {}: {} sends {} bytes but the receive expects {}", op_id, peer_,
                                                early.total, dst.size()));
        remember_cancelled(op_id);
      } else {
        for (auto& [offset, bytes] : early.segments) {
          if (!bytes.empty()) std::memcpy(dst.data() + offset, bytes.data(), bytes.size());
          op->received += bytes.size();
          op->any_segment = true;
        }
      }
    }
    complete_recv_if_done(op, pending);
  }
  wake_parked_readers();
}

void Link::send_control(std::vector<std::byte> message, Completion done) {
  {
    Pending pending;
    MutexLock lock(mu_);
    if (!failure_.is_ok()) {
      pending.add(std::move(done), failure_);
      return;
    }
    if (message.size() > options_.limits.max_control_payload) {
      pending.add(std::move(done), invalid_argument(fmt::format("control message of {} bytes exceeds the limit of {}",
                                                                message.size(), options_.limits.max_control_payload)));
      return;
    }
    FrameHeader h;
    h.type = FrameType::kControl;
    h.length = static_cast<uint32_t>(message.size());
    queue_frame(0, h, std::move(message), std::move(done));
  }
  wake_writer(0);
}

void Link::cancel_matching(uint64_t op_id, uint64_t mask, Status why) {
  {
    Pending pending;
    MutexLock lock(mu_);
    if (!failure_.is_ok()) return;  // every op has failed already
    cancel_locked(op_id, mask, why, pending);
    FrameHeader h;
    h.type = FrameType::kCancel;
    h.op_id = op_id;
    h.offset = mask;
    std::vector<std::byte> reason;  // only a mismatch travels (frame.hpp, kMaxCancelReason)
    if (transport::cancel_reason_travels(why)) {
      const std::string& text = why.message();
      const size_t n = std::min<size_t>(text.size(), kMaxCancelReason);
      reason.resize(n);
      std::memcpy(reason.data(), text.data(), n);
    }
    h.length = static_cast<uint32_t>(reason.size());
    queue_frame(0, h, std::move(reason), {});
  }
  wake_writer(0);
  wake_parked_readers();
}

void Link::cancel_locked(uint64_t op_id, uint64_t mask, const Status& why, Pending& pending) {
  remember_cancelled(op_id, mask, transport::cancel_reason_travels(why) ? why : Status::ok());
  for (auto it = watches_.begin(); it != watches_.end();) {
    if ((it->second.op_id & mask) != (op_id & mask)) {
      ++it;
      continue;
    }
    pending.add(std::move(it->second.done), why);
    it = watches_.erase(it);
  }
  auto matches = [&](uint64_t id) { return (id & mask) == (op_id & mask); };
  for (auto& [id, op] : std::map(sends_)) {
    if (!matches(id)) continue;
    if (op->status.is_ok()) op->status = why;
    std::erase(send_queue_, op);
    complete_send_if_done(op, pending);
  }
  for (auto& [id, op] : std::map(recvs_)) {
    if (!matches(id)) continue;
    if (op->status.is_ok()) op->status = why;
    complete_recv_if_done(op, pending);
  }
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    if (!matches(it->first)) {
      ++it;
      continue;
    }
    for (auto& [offset, bytes] : it->second.segments) unexpected_bytes_ -= unexpected_cost(bytes.size());
    it = unexpected_.erase(it);
  }
}

uint64_t Link::watch_cancel(uint64_t op_id, Completion done) {
  Pending pending;
  MutexLock lock(mu_);
  const uint64_t id = ++next_watch_;
  if (!failure_.is_ok())
    pending.add(std::move(done), failure_);
  else if (is_cancelled(op_id))
    pending.add(std::move(done), cancelled_reason(op_id));
  else
    watches_[id] = {op_id, std::move(done)};
  return id;
}

void Link::unwatch(uint64_t id) {
  Completion dropped;  // destroyed after the lock: it may hold what calls back into this link
  MutexLock lock(mu_);
  if (auto it = watches_.find(id); it != watches_.end()) {
    dropped = std::move(it->second.done);
    watches_.erase(it);
  }
}

void Link::close(Status why) { fail(std::move(why)); }

void Link::queue_frame(size_t index, const FrameHeader& h, std::vector<std::byte> payload, Completion done) {
  auto item = std::make_unique<WriteItem>();
  item->header = h;
  item->owned = std::move(payload);
  item->payload = item->owned;
  item->done = std::move(done);
  frame_queues_[index].push_back(std::move(item));
}

void Link::remember_cancelled(uint64_t op_id, uint64_t mask, const Status& reason) {
  if (mask != ~uint64_t{0}) {
    cancelled_prefixes_.push_back({op_id & mask, mask, reason});
    if (cancelled_prefixes_.size() > kMaxRememberedPrefixes) cancelled_prefixes_.pop_front();
    return;
  }
  if (!cancelled_.insert(op_id).second) return;
  cancelled_order_.push_back(op_id);
  if (cancelled_order_.size() > kMaxRememberedCancels) {
    cancelled_.erase(cancelled_order_.front());
    cancelled_order_.pop_front();
  }
}

bool Link::is_cancelled(uint64_t op_id) const {
  if (cancelled_.contains(op_id)) return true;
  for (const CancelledPrefix& c : cancelled_prefixes_)
    if ((op_id & c.mask) == c.prefix) return true;
  return false;
}

Status Link::cancelled_reason(uint64_t op_id) const {
  for (const CancelledPrefix& c : cancelled_prefixes_)
    if ((op_id & c.mask) == c.prefix && !c.reason.is_ok()) return c.reason;
  return aborted_error(fmt::format("op {} was cancelled", op_id));
}

// An op whose every byte was written (or received) has succeeded, even if the link failed or the
// op was cancelled while its last write's completion was still on its way: the peer that closed
// right after reading those bytes must not turn a finished transfer into an error.
void Link::complete_send_if_done(std::shared_ptr<SendOp> op, Pending& pending) {
  if (op->finished || op->writes_in_flight > 0) return;
  const bool sent = op->all_assigned && op->written == op->data.size();
  if (!sent && op->status.is_ok()) return;
  op->finished = true;
  sends_.erase(op->id);
  pending.add(std::move(op->done), sent ? Status::ok() : op->status);
}

void Link::complete_recv_if_done(std::shared_ptr<RecvOp> op, Pending& pending) {
  if (op->finished || op->reads_in_flight > 0) return;
  const bool received = op->any_segment && op->received == op->dst.size();
  if (!received && op->status.is_ok()) return;
  op->finished = true;
  recvs_.erase(op->id);
  pending.add(std::move(op->done), received ? Status::ok() : op->status);
}

bool Link::next_write(size_t index, WriteItem* out) {
  auto& frames = frame_queues_[index];
  if (!frames.empty()) {
    *out = std::move(*frames.front());
    out->payload = out->owned;  // the span must point at the moved-to vector
    frames.pop_front();
    return true;
  }
  if (send_queue_.empty()) return false;
  auto op = send_queue_.front();
  const uint64_t total = op->data.size();
  const uint64_t len = std::min<uint64_t>(options_.segment_bytes, total - op->next_offset);
  out->header = FrameHeader{FrameType::kData, 0, static_cast<uint32_t>(len), op->id, op->next_offset, total};
  out->payload = op->data.subspan(op->next_offset, len);
  out->op = op;
  out->owned.clear();
  out->done = {};
  op->next_offset += len;
  ++op->writes_in_flight;
  if (op->next_offset == total) {
    op->all_assigned = true;
    send_queue_.pop_front();
  }
  return true;
}

void Link::finish_write(size_t index, const WriteItem& item, const Status& s) {
  if (!s) fail_after_reading(index, s);
  Pending pending;
  MutexLock lock(mu_);
  if (item.op) {
    --item.op->writes_in_flight;
    if (s) item.op->written += item.payload.size();
    complete_send_if_done(item.op, pending);
  } else {
    pending.add(item.done, s);
  }
}

// A write fails once the remote end has closed or reset the connection, and what it wrote before
// it closed (a REMOVED, a REJECT, the last control message) is still in this side's receive
// buffer: the kernel hands queued bytes to a read before the reset. Failing the link at once would
// drop them and report "broken pipe" instead of the remote's reason, so the reader gets a moment to
// deliver them and reach the end of the stream, which fails the link; the write's error fails it
// if the reader has not by then (a reader parked for lack of a posted receive).
void Link::fail_after_reading(size_t index, Status why) {
  auto grace = std::make_shared<asio::steady_timer>(connections_[index]->strand(),
                                                    kReadGraceAfterWriteError);
  grace->async_wait(
      [self = shared_from_this(), grace, why](const asio::error_code&) { self->fail(why); });
}

void Link::fail(Status why) {
  FailureHandler handler;
  {
    Pending pending;
    MutexLock lock(mu_);
    if (!failure_.is_ok()) return;
    failure_ = why;
    send_queue_.clear();
    for (auto& [id, op] : std::map(sends_)) {
      if (op->status.is_ok()) op->status = why;
      complete_send_if_done(op, pending);
    }
    for (auto& [id, op] : std::map(recvs_)) {
      if (op->status.is_ok()) op->status = why;
      complete_recv_if_done(op, pending);
    }
    for (auto& queue : frame_queues_) {
      for (auto& item : queue) pending.add(std::move(item->done), why);
      queue.clear();
    }
    unexpected_.clear();
    unexpected_bytes_ = 0;
    for (auto& [id, watch] : watches_) pending.add(std::move(watch.done), why);
    watches_.clear();
    handler = std::move(on_failure_);
  }
  if (why.code() != LH_ERR_CLOSED) log::info("net", "link to {} failed: {}", peer_, why.to_string());
  for (auto& c : connections_) c->close();
  wake_writers();
  wake_parked_readers();
  if (handler) handler(why);
}

void Link::wake_writer(size_t index) {
  asio::post(connections_[index]->strand(), [self = shared_from_this(), index] { self->writer_wake_[index]->cancel(); });
}

void Link::wake_writers() {
  for (size_t i = 0; i < connections_.size(); ++i) wake_writer(i);
}

void Link::wake_parked_readers() {
  for (size_t i = 0; i < connections_.size(); ++i)
    asio::post(connections_[i]->strand(), [self = shared_from_this(), i] { self->reader_park_[i]->cancel(); });
}

}  // namespace longhaul::net
