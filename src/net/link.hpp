// A link: K TCP connections between two endpoints, carrying many tagged data operations at once.
//
// send(op, data) cuts `data` into segments and stripes them over all K connections; each
// connection takes the next segment when its previous write finishes, so a slow connection takes
// fewer segments instead of stalling the others. The receiver writes each segment straight into
// the buffer registered with recv(op, dst) at the segment's offset and completes the op once every
// byte has arrived. Segments that arrive before their recv() is posted are held (up to
// TransportOptions::max_unexpected_bytes, then the connection stops reading until the recv comes).
//
// Failure: any error on any connection fails the whole link: every pending op on this side
// completes with the error, and closing the sockets makes the other side fail too. A write error
// fails it only after that connection's reader has delivered the frames the remote end sent before
// it closed (a second at most), so a remote's last word (its reason for closing) is never lost to a
// write that raced with it. cancel(op)
// ends one op early on this side, tells the other side, and discards its late segments.
//
// Traffic: count_traffic() gives the link a TrafficCounter; every frame it writes or reads from
// then on (and those it carried before) is added to it, header and payload.
//
// Ownership: buffers passed to send/recv must stay valid and untouched until their completion
// runs. Completions and the control handler run on the link's I/O threads and must not block.
// All public methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <asio/steady_timer.hpp>

#include "common/mutex.hpp"
#include "common/status.hpp"
#include "net/connection.hpp"
#include "net/options.hpp"
#include "net/tcp_stats.hpp"
#include "net/traffic.hpp"
#include "transport/data_link.hpp"

namespace longhaul::net {

// The network's transport::DataLink; op ids are the interface's tags.
class Link final : public transport::DataLink, public std::enable_shared_from_this<Link> {
 public:
  using Completion = transport::Completion;
  using ControlHandler = std::function<void(std::vector<std::byte> message)>;
  using FailureHandler = std::function<void(const Status& why)>;

  // Takes handshaken connections (index i of the link at position i).
  static std::shared_ptr<Link> create(std::vector<std::shared_ptr<Connection>> connections,
                                      const TransportOptions& options, std::string peer);
  ~Link();

  // Starts reading and writing. `on_control` receives CONTROL messages in arrival order;
  // `on_failure` runs once when the link fails. Both may be empty.
  void start(ControlHandler on_control = {}, FailureHandler on_failure = {});

  void send(uint64_t op_id, std::span<const std::byte> data, Completion done) override;
  void recv(uint64_t op_id, std::span<std::byte> dst, Completion done) override;
  // Control messages travel in order on connection 0.
  void send_control(std::vector<std::byte> message, Completion done = {});
  // Ends op_id on this side with `why` (once its in-flight I/O has stopped touching the buffer),
  // tells the remote side, and discards segments of op_id that arrive later.
  void cancel(uint64_t op_id, Status why) { cancel_matching(op_id, ~uint64_t{0}, std::move(why)); }
  // The same for every op whose id matches op_id on the bits of `mask`, including ops that are
  // posted later on either side: a layer above that numbers the transfers of one operation under a
  // common prefix ends all of them, present and future, at both ends with one call.
  void cancel_matching(uint64_t op_id, uint64_t mask, Status why) override;
  uint64_t watch_cancel(uint64_t op_id, Completion done) override;
  void unwatch(uint64_t id) override;
  // Fails every pending op with `why` and closes the connections.
  void close(Status why = closed_error("link closed locally"));
  // Counts every frame this link has written to or read from its connections into `counter`
  // (header and payload, all types, all connections; docs/transport.md, "Traffic counters"),
  // those it carried before this call included: an inbound link carries its first messages
  // before the layer above knows what the link is for. Only the first non-null counter counts;
  // later calls change nothing. A link never given one counts for nobody. Costs one relaxed
  // fetch_add per frame. Thread-safe; the link keeps `counter` alive.
  void count_traffic(std::shared_ptr<TrafficCounter> counter);

  const std::string& peer() const override { return peer_; }
  size_t connection_count() const { return connections_.size(); }
  bool is_tls() const { return connections_.front()->is_tls(); }
  // OK while the link works; afterwards the reason it failed.
  Status failure() const override;
  // What the kernel measures about this link's connections (tcp_stats.hpp); all zero once the
  // link has failed. Thread-safe; one getsockopt per connection.
  TcpStats tcp_stats() const;
  // Segments that arrived before their receive was posted, held now (for tests and metrics).
  size_t unexpected_segments() const;
  // Replaces TransportOptions::max_unexpected_bytes for this link. 0: a DATA frame that arrives
  // before its receive is posted waits in the kernel (its connection stops reading), so a link
  // whose purpose is not known yet makes this side hold nothing. Raising it resumes those
  // connections. Thread-safe; call it before start() for it to cover the first frames.
  void set_max_unexpected_bytes(uint64_t bytes);
  // Replaces FrameLimits::max_control_payload for the CONTROL frames this link reads (never
  // above it): a longer one fails the link from its header, before a payload byte is read or
  // allocated. Thread-safe; call it before start() for it to cover the first frames.
  void set_max_control_bytes(uint32_t bytes);

 private:
  struct SendOp;
  struct RecvOp;
  struct WriteItem;
  struct Pending;  // completions to run once the lock is released

  Link(std::vector<std::shared_ptr<Connection>> connections, const TransportOptions& options,
       std::string peer);

  asio::awaitable<void> reader(size_t index);
  asio::awaitable<void> writer(size_t index);
  // The reader's steps: one frame's effect (an error fails the link), and a connection's end.
  asio::awaitable<Status> dispatch_frame(Connection& conn, const FrameHeader& h, size_t index);
  asio::awaitable<Status> receive_data(Connection& conn, const FrameHeader& h, size_t index);
  asio::awaitable<Status> receive_control(Connection& conn, const FrameHeader& h);
  asio::awaitable<Status> receive_reject(Connection& conn, const FrameHeader& h);
  void end_of_connection(const Connection& conn, const Status& why);
  Status finish_segment(const FrameHeader& h, const std::shared_ptr<RecvOp>& op, bool drain,
                        std::vector<std::byte> early, Status s);
  Status keep_early_segment(const FrameHeader& h, std::vector<std::byte> early, Pending& pending)
      REQUIRES(mu_);
  bool next_write(size_t index, WriteItem* out) REQUIRES(mu_);
  void finish_write(size_t index, const WriteItem& item, const Status& s);
  void fail_after_reading(size_t index, Status why);
  void fail(Status why);
  void wake_writers();
  void wake_writer(size_t index);
  void wake_parked_readers();
  void count_sent(uint64_t bytes) { traffic_.load(std::memory_order_acquire)->add_sent(bytes); }
  void count_received(uint64_t bytes) {
    traffic_.load(std::memory_order_acquire)->add_received(bytes);
  }
  void queue_frame(size_t index, const FrameHeader& h, std::vector<std::byte> payload,
                   Completion done) REQUIRES(mu_);
  // Take the op by value: callers may pass a reference into the map these erase from.
  void complete_recv_if_done(std::shared_ptr<RecvOp> op, Pending& pending) REQUIRES(mu_);
  void complete_send_if_done(std::shared_ptr<SendOp> op, Pending& pending) REQUIRES(mu_);
  // `reason`: what a later post of a matching op completes with (OK: a plain "cancelled").
  void remember_cancelled(uint64_t op_id, uint64_t mask = ~uint64_t{0},
                          const Status& reason = Status::ok()) REQUIRES(mu_);
  bool is_cancelled(uint64_t op_id) const REQUIRES(mu_);
  // Why a post of a cancelled op fails: the mismatch a cancel carried, else "cancelled".
  Status cancelled_reason(uint64_t op_id) const REQUIRES(mu_);
  void cancel_locked(uint64_t op_id, uint64_t mask, const Status& why, Pending& pending)
      REQUIRES(mu_);

  // How long a write error waits for the connection's reader to deliver what the remote sent
  // before it closed (fail_after_reading).
  static constexpr std::chrono::milliseconds kReadGraceAfterWriteError{1000};

  const TransportOptions options_;
  const std::string peer_;
  std::vector<std::shared_ptr<Connection>> connections_;
  std::vector<std::unique_ptr<asio::steady_timer>>
      writer_wake_;  // one per connection, on its strand
  std::vector<std::unique_ptr<asio::steady_timer>> reader_park_;
  // Where frames are counted: uncounted_ until count_traffic, then *traffic_owner_. Stored with
  // release and loaded with acquire, so a reader that sees the new counter sees it constructed.
  TrafficCounter uncounted_;
  std::atomic<TrafficCounter*> traffic_{&uncounted_};

  mutable Mutex mu_;
  Status failure_ GUARDED_BY(mu_);
  bool started_ GUARDED_BY(mu_) = false;
  std::shared_ptr<TrafficCounter> traffic_owner_ GUARDED_BY(mu_);  // set once by count_traffic
  // Connections the remote end closed between frames.
  size_t connections_at_end_ GUARDED_BY(mu_) = 0;
  ControlHandler on_control_ GUARDED_BY(mu_);
  FailureHandler on_failure_ GUARDED_BY(mu_);
  // Ops with segments not yet assigned.
  std::deque<std::shared_ptr<SendOp>> send_queue_ GUARDED_BY(mu_);
  // Every pending send by op id.
  std::map<uint64_t, std::shared_ptr<SendOp>> sends_ GUARDED_BY(mu_);
  std::map<uint64_t, std::shared_ptr<RecvOp>> recvs_ GUARDED_BY(mu_);
  // Non-DATA frames per connection.
  std::vector<std::deque<std::unique_ptr<WriteItem>>> frame_queues_ GUARDED_BY(mu_);
  struct Unexpected {
    uint64_t total = 0;
    std::vector<std::pair<uint64_t, std::vector<std::byte>>> segments;  // (offset, bytes)
  };
  // What one early segment counts against max_unexpected_bytes: its bytes and the bookkeeping that
  // holds them, so that empty segments under fresh op ids cannot grow the table for free.
  static constexpr uint64_t kUnexpectedSegmentOverhead = 128;
  static uint64_t unexpected_cost(uint64_t bytes) { return bytes + kUnexpectedSegmentOverhead; }
  std::map<uint64_t, Unexpected> unexpected_ GUARDED_BY(mu_);
  // unexpected_cost of every segment held or being read.
  uint64_t unexpected_bytes_ GUARDED_BY(mu_) = 0;
  // options_.max_unexpected_bytes until set_max_unexpected_bytes.
  uint64_t max_unexpected_bytes_ GUARDED_BY(mu_);
  std::atomic<uint32_t> max_control_bytes_;       // options_.limits.max_control_payload until set
  std::set<uint64_t> cancelled_ GUARDED_BY(mu_);  // exact ids
  std::deque<uint64_t> cancelled_order_ GUARDED_BY(mu_);
  struct CancelledPrefix {
    uint64_t prefix = 0;  // id & mask
    uint64_t mask = 0;
    Status reason;  // a mismatch's, which later posts fail with; OK: a plain cancel
  };
  std::deque<CancelledPrefix> cancelled_prefixes_ GUARDED_BY(mu_);
  struct CancelWatch {
    uint64_t op_id = 0;
    Completion done;
  };
  std::map<uint64_t, CancelWatch> watches_ GUARDED_BY(mu_);  // by id (watch_cancel)
  uint64_t next_watch_ GUARDED_BY(mu_) = 0;
};

// Applies TransportOptions::link_rate_bytes_per_s to a link's connections before it is created
// (each paced at rate / K). 0: nothing to do.
Status cap_link_rate(const std::vector<std::shared_ptr<Connection>>& connections,
                     uint64_t link_bytes_per_s);

}  // namespace longhaul::net
