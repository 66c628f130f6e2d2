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
      if (conn.closed_between_frames()) {
        // The remote end closes all K connections at once, but this one may reach its end
        // while another still holds the last bytes of an op: the link fails only once every
        // connection has been read to its end.
        MutexLock lock(mu_);
        if (++connections_at_end_ < connections_.size()) co_return;
      }
      fail(header.status().code() == LH_ERR_CLOSED ? header.status()
                                                    : header.status().with_context(fmt::format("link to {}", peer_)));
      co_return;
    }
    const FrameHeader& h = *header;
    Status s;
    switch (h.type) {
      case FrameType::kData:
        // A master posts no receives: DATA to it could only fill the unexpected-data buffer.
        if (options_.role == Role::kMaster)
          s = protocol_error(fmt::format("{} sent a DATA frame to the master", peer_));
        else
          s = co_await receive_data(conn, h, index);
        break;
      case FrameType::kControl: {
        if (const uint32_t limit = max_control_bytes_.load(std::memory_order_relaxed);
            h.length > limit) {
          s = protocol_error(
              fmt::format("{} sent a CONTROL frame of {} bytes; this link takes at most {}", peer_,
                          h.length, limit));
          break;
        }
        std::vector<std::byte> message(h.length);
        s = co_await conn.read_payload(message);
        if (!s) break;
        count_received(kFrameHeaderBytes + h.length);
        ControlHandler handler;
        {
          MutexLock lock(mu_);
          handler = on_control_;
        }
        if (handler) handler(std::move(message));
        break;
      }
      case FrameType::kPing: {
        count_received(kFrameHeaderBytes);
        {
          MutexLock lock(mu_);
          queue_frame(index, FrameHeader{FrameType::kPong, 0, 0, h.op_id, 0, 0}, {}, {});
        }
        wake_writer(index);
        break;
      }
      case FrameType::kPong:
        count_received(kFrameHeaderBytes);
        break;
      case FrameType::kCancel: {
        count_received(kFrameHeaderBytes);
        Pending pending;
        MutexLock lock(mu_);
        cancel_locked(h.op_id, h.offset, aborted_error(fmt::format("op {} was cancelled by {}", h.op_id, peer_)),
                      pending);
        break;
      }
      case FrameType::kReject: {
        std::vector<std::byte> payload(h.length);
        s = co_await conn.read_payload(payload);
        if (!s) break;
        count_received(kFrameHeaderBytes + h.length);
        RejectMessage reject;
        s = decode(payload, &reject);
        if (s) s = Status(reject.code, fmt::format("{} closed the link: {}", peer_, reject.reason));
        break;
      }
      default:
        s = protocol_error(fmt::format("unexpected {} frame from {} after the handshake", frame_type_name(h.type), peer_));
    }
    if (!s) {
      fail(s);
      co_return;
    }
  }
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
          op->status = protocol_error(fmt::format("op {}: {} sends {} bytes but the receive expects {}", h.op_id,
                                                  peer_, h.total, op->dst.size()));
          remember_cancelled(h.op_id);
          complete_recv_if_done(op, pending);
          op.reset();
          drain = true;
        } else if (op->received + h.length > op->dst.size()) {
          co_return protocol_error(fmt::format("op {}: {} sent more bytes than the op holds", h.op_id, peer_));
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
  if (drain) s = co_await conn.skip_payload(h.length);
  else if (op) s = co_await conn.read_payload(op->dst.subspan(h.offset, h.length));
  else s = co_await conn.read_payload(early);
  if (s) count_received(kFrameHeaderBytes + h.length);

  Pending pending;
  MutexLock lock(mu_);
  if (op) {
    --op->reads_in_flight;
    if (s) {
      op->received += h.length;
      op->any_segment = true;
    }
    complete_recv_if_done(op, pending);
  } else if (!drain && failure_.is_ok()) {
    unexpected_bytes_ -= unexpected_cost(h.length);
    if (!s) co_return s;
    if (auto it = recvs_.find(h.op_id); it != recvs_.end()) {
      // The receive was posted while this segment was in flight.
      auto& late_op = it->second;
      if (h.total != late_op->dst.size()) {
        late_op->status = protocol_error(fmt::format("op {}: {} sends {} bytes but the receive expects {}",
                                                     h.op_id, peer_, h.total, late_op->dst.size()));
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
        co_return protocol_error(fmt::format("op {}: {} changed its size mid-op", h.op_id, peer_));
      unexpected_bytes_ += unexpected_cost(h.length);
      u.segments.emplace_back(h.offset, std::move(early));
    }
  }
  co_return s;
}

}  // namespace longhaul::net
