// The link's I/O loops: one writer and one reader coroutine per connection, on its strand. The
// writer sends the frames the link queued for its connection; the reader counts and dispatches
// every frame that arrives (data into its receive, control to the handler, cancels, pings).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "common/log.hpp"
#include "net/link.hpp"
#include "net/link_ops.hpp"

namespace longhaul::net {

asio::awaitable<void> Link::writer(size_t index) {
  Connection& conn = *connections_[index];
  for (;;) {
    WriteItem item;
    bool have = false;
    {
      MutexLock lock(mu_);
      if (!failure_.is_ok()) co_return;
      have = next_write(index, &item);
    }
    if (!have) {
      // Strand-serialised with wake_writer's cancel(), so a wake-up is never lost between the
      // check above and this wait.
      asio::error_code ec;
      co_await writer_wake_[index]->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    Status s = co_await conn.write_frame(item.header, item.payload);
    if (s) count_sent(kFrameHeaderBytes + item.payload.size());
    finish_write(index, item, s);
    if (!s) co_return;  // the link fails once the reader has read what came before the end
  }
}

// Every frame is counted once it has been read in full and before anything it triggers runs (a
// completion, the control handler), so whoever sees its effect finds it counted. PING, PONG and
// CANCEL frames carry no payload (decode_header enforces it).
asio::awaitable<void> Link::reader(size_t index) {
  Connection& conn = *connections_[index];
  for (;;) {
    auto header = co_await conn.read_header();
    if (!header) {
      end_of_connection(conn, header.status());
      co_return;
    }
    const FrameHeader h = *header;
    Status s = co_await dispatch_frame(conn, h, index);
    if (!s) {
      fail(s);
      co_return;
    }
  }
}

// The remote end closes all K connections at once, but one may reach its end while another still
// holds the last bytes of an op (or its last control message): a connection closed between frames
// fails the link only once every connection has been read to its end.
void Link::end_of_connection(const Connection& conn, const Status& why) {
  if (conn.closed_between_frames()) {
    MutexLock lock(mu_);
    if (++connections_at_end_ < connections_.size()) return;
  }
  fail(why.code() == LH_ERR_CLOSED ? why : why.with_context(fmt::format("link to {}", peer_)));
}

asio::awaitable<Status> Link::dispatch_frame(Connection& conn, const FrameHeader& h, size_t index) {
  switch (h.type) {
    case FrameType::kData: {
      // A master posts no receives: DATA to it could only fill the unexpected-data buffer.
      if (options_.role == Role::kMaster)
        co_return protocol_error(fmt::format("{} sent a DATA frame to the master", peer_));
      Status s = co_await receive_data(conn, h, index);
      co_return s;
    }
    case FrameType::kControl: {
      Status s = co_await receive_control(conn, h);
      co_return s;
    }
    case FrameType::kPing: {
      count_received(kFrameHeaderBytes);
      {
        MutexLock lock(mu_);
        queue_frame(index, FrameHeader{FrameType::kPong, 0, 0, h.op_id, 0, 0}, {}, {});
      }
      wake_writer(index);
      co_return Status::ok();
    }
    case FrameType::kPong:
      count_received(kFrameHeaderBytes);
      co_return Status::ok();
    case FrameType::kCancel: {
      // A reason travels only with a mismatch (frame.hpp): every member fails with its words.
      std::string reason(h.length, '\0');
      if (h.length > 0) {
        Status s = co_await conn.read_payload(std::as_writable_bytes(std::span(reason)));
        if (!s) co_return s;
      }
      count_received(kFrameHeaderBytes + h.length);
      const Status why =
          h.length > 0 ? mismatch_error(reason)
                       : aborted_error(fmt::format("op {} was cancelled by {}", h.op_id, peer_));
      Pending pending;
      MutexLock lock(mu_);
      cancel_locked(h.op_id, h.offset, why, pending);
      co_return Status::ok();
    }
    case FrameType::kReject: {
      Status s = co_await receive_reject(conn, h);
      co_return s;
    }
    default:
      co_return protocol_error(fmt::format("unexpected {} frame from {} after the handshake",
                                           frame_type_name(h.type), peer_));
  }
}

asio::awaitable<Status> Link::receive_control(Connection& conn, const FrameHeader& h) {
  if (const uint32_t limit = max_control_bytes_.load(std::memory_order_relaxed); h.length > limit)
    co_return protocol_error(fmt::format(
        "{} sent a CONTROL frame of {} bytes; this link takes at most {}", peer_, h.length, limit));
  std::vector<std::byte> message(h.length);
  Status s = co_await conn.read_payload(message);
  if (!s) co_return s;
  count_received(kFrameHeaderBytes + h.length);
  ControlHandler handler;
  {
    MutexLock lock(mu_);
    handler = on_control_;
  }
  if (handler) handler(std::move(message));
  co_return Status::ok();
}

// A REJECT ends the link with the remote's reason.
asio::awaitable<Status> Link::receive_reject(Connection& conn, const FrameHeader& h) {
  std::vector<std::byte> payload(h.length);
  Status s = co_await conn.read_payload(payload);
  if (!s) co_return s;
  count_received(kFrameHeaderBytes + h.length);
  RejectMessage reject;
  s = decode(payload, &reject);
  if (!s) co_return s;
  co_return Status(reject.code, fmt::format("{} closed the link: {}", peer_, reject.reason));
}

asio::awaitable<Status> Link::receive_data(Connection& conn, const FrameHeader& h, size_t index) {
  std::shared_ptr<RecvOp> op;
  std::vector<std::byte> early;  // payload that arrived before its receive was posted
  bool drain = false;
  for (;;) {
    bool park = false;
    {
      Pending pending;
      MutexLock lock(mu_);
      if (!failure_.is_ok()) co_return failure_;
      if (is_cancelled(h.op_id)) {
        drain = true;
      } else if (auto it = recvs_.find(h.op_id); it != recvs_.end()) {
        op = it->second;
        if (h.total != op->dst.size()) {
          op->status =
              protocol_error(fmt::format("op {}: {} sends {} bytes but the receive expects {}",
                                         h.op_id, peer_, h.total, op->dst.size()));
          remember_cancelled(h.op_id);
          complete_recv_if_done(op, pending);
          op.reset();
          drain = true;
        } else if (op->received + h.length > op->dst.size()) {
          co_return protocol_error(
              fmt::format("op {}: {} sent more bytes than the op holds", h.op_id, peer_));
        } else {
          ++op->reads_in_flight;
        }
      } else if (unexpected_bytes_ + unexpected_cost(h.length) > max_unexpected_bytes_) {
        park = true;
      } else {
        unexpected_bytes_ += unexpected_cost(h.length);  // reserved now: concurrent readers see it
        early.resize(h.length);
      }
    }
    if (!park) break;
    asio::error_code ec;
    co_await reader_park_[index]->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }

  Status s;
  if (drain)
    s = co_await conn.skip_payload(h.length);
  else if (op)
    s = co_await conn.read_payload(op->dst.subspan(h.offset, h.length));
  else
    s = co_await conn.read_payload(early);
  if (s) count_received(kFrameHeaderBytes + h.length);
  co_return finish_segment(h, op, drain, std::move(early), std::move(s));
}

// A DATA segment's payload has been read (status s): into its receive (op), nowhere (drain), or
// into `early`, which joins the receive posted meanwhile or waits for one in unexpected_.
Status Link::finish_segment(const FrameHeader& h, const std::shared_ptr<RecvOp>& op, bool drain,
                            std::vector<std::byte> early, Status s) {
  Pending pending;
  MutexLock lock(mu_);
  if (op) {
    --op->reads_in_flight;
    if (s) {
      op->received += h.length;
      op->any_segment = true;
    }
    complete_recv_if_done(op, pending);
    return s;
  }
  if (drain || !failure_.is_ok()) return s;
  unexpected_bytes_ -= unexpected_cost(h.length);
  if (!s) return s;
  return keep_early_segment(h, std::move(early), pending);
}

Status Link::keep_early_segment(const FrameHeader& h, std::vector<std::byte> early,
                                Pending& pending) {
  if (auto it = recvs_.find(h.op_id); it != recvs_.end()) {
    // The receive was posted while this segment was in flight.
    auto& late_op = it->second;
    if (h.total != late_op->dst.size()) {
      late_op->status =
          protocol_error(fmt::format("op {}: {} sends {} bytes but the receive expects {}", h.op_id,
                                     peer_, h.total, late_op->dst.size()));
      remember_cancelled(h.op_id);
    } else if (late_op->status.is_ok()) {
      if (!early.empty()) std::memcpy(late_op->dst.data() + h.offset, early.data(), early.size());
      late_op->received += h.length;
      late_op->any_segment = true;
    }
    complete_recv_if_done(late_op, pending);
  } else if (!is_cancelled(h.op_id)) {
    auto& u = unexpected_[h.op_id];
    if (u.segments.empty()) u.total = h.total;
    if (u.total != h.total)
      return protocol_error(fmt::format("op {}: {} changed its size mid-op", h.op_id, peer_));
    unexpected_bytes_ += unexpected_cost(h.length);
    u.segments.emplace_back(h.offset, std::move(early));
  }
  return Status::ok();
}

}  // namespace longhaul::net
