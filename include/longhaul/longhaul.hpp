// longhaul.hpp: a header-only C++20 API over the C ABI of longhaul.h.
//
// RAII owners for the handles (move-only), option structs with the C defaults, and exceptions:
// every failing call throws longhaul::Error, which carries the lh_status and the library's message.
// Thread safety is that of the C functions underneath (see longhaul.h): the const queries of
// Communicator, its allreduce/allreduce_async (with one another, not with update_topology) and
// an Operation's test/wait/info are thread-safe; the rest must not run concurrently on one object.
// Lifetimes and ownership are those of longhaul.h too: the buffers passed to a collective stay
// the caller's and must outlive it (an Operation's destructor waits for it).
//
//   longhaul::Master master({.listen_address = "127.0.0.1:0"});
//   master.run();
//   longhaul::Communicator comm({.master_address = "127.0.0.1:" + std::to_string(master.port())});
//   comm.connect();
//   for (;;) {
//     if (comm.peers_pending()) comm.update_topology();
//     comm.allreduce(std::span(gradients), longhaul::ReduceOp::kAvg);  // throws on failure
//   }
#ifndef LONGHAUL_LONGHAUL_HPP_
#define LONGHAUL_LONGHAUL_HPP_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "longhaul/longhaul.h"

namespace longhaul {

// A failed longhaul call: what() is "LH_ERR_...: message", status() the code.
class Error : public std::runtime_error {
 public:
  Error(lh_status status, const std::string& message)
      : std::runtime_error(std::string(lh_status_string(status)) + ": " + message),
        status_(status) {}
  lh_status status() const noexcept { return status_; }

 private:
  lh_status status_;
};

namespace detail {
// Throws Error(s, message()) unless s is LH_OK. The message is read only once the call has failed:
// in check(call(), read_message()) the two would run in either order, and a message read before
// the call is the previous one, or a dangling pointer.
template <class Message>
void check(lh_status s, Message message) {
  if (s == LH_OK) return;
  const char* m = message();
  throw Error(s, m ? m : "");
}
inline const char* c_str_or_null(const std::string& s) {
  return s.empty() ? nullptr : s.c_str();
}
inline std::string or_empty(const char* s) {
  return s ? s : "";
}
// The C defaults (lh_*_options_init), which the option structs below copy: defaults are written
// once, in the library.
inline const lh_master_options& master_defaults() {
  static const lh_master_options o = [] {
    lh_master_options d;
    lh_master_options_init(&d);
    return d;
  }();
  return o;
}
inline const lh_comm_options& comm_defaults() {
  static const lh_comm_options o = [] {
    lh_comm_options d;
    lh_comm_options_init(&d);
    return d;
  }();
  return o;
}
inline const lh_allreduce_options& allreduce_defaults() {
  static const lh_allreduce_options o = [] {
    lh_allreduce_options d;
    lh_allreduce_options_init(&d);
    return d;
  }();
  return o;
}
inline const lh_sparse_allgather_options& sparse_allgather_defaults() {
  static const lh_sparse_allgather_options o = [] {
    lh_sparse_allgather_options d;
    lh_sparse_allgather_options_init(&d);
    return d;
  }();
  return o;
}
}  // namespace detail

// The cluster secret in the file at `path`, read with the rules of lh_secret_from_file (one final
// "\n" or "\r\n" removed, mode 600, at least 16 bytes unless allow_weak), which
// longhaul-master's --secret-file applies too. Throws Error (LH_ERR_IO, LH_ERR_INVALID_ARGUMENT)
// with how to fix it. Thread-safe.
inline std::string secret_from_file(const std::string& path, bool allow_weak = false) {
  std::string secret(LH_SECRET_MAX_BYTES + 1, '\0');
  size_t length = 0;
  detail::check(
      lh_secret_from_file(path.c_str(), allow_weak ? 1 : 0, secret.data(), secret.size(), &length),
      lh_last_error);
  secret.resize(length);
  return secret;
}

inline std::string version() {
  return lh_version();
}
// "debug", "info", "warn", "error" or "off".
inline void set_log_level(const std::string& level) {
  detail::check(lh_set_log_level(level.c_str()), lh_last_error);
}

// Mirrors lh_master_options; the defaults are read from lh_master_options_init (the fields'
// meanings and defaults are documented there).
struct MasterOptions {
  std::string listen_address = detail::or_empty(detail::master_defaults().listen_address);
  std::string secret = detail::or_empty(detail::master_defaults().secret);
  std::string tls_cert_file = detail::or_empty(detail::master_defaults().tls_cert_file);
  std::string tls_key_file = detail::or_empty(detail::master_defaults().tls_key_file);
  uint32_t heartbeat_interval_ms = detail::master_defaults().heartbeat_interval_ms;
  uint32_t heartbeat_misses = detail::master_defaults().heartbeat_misses;
  uint32_t topology_timeout_ms = detail::master_defaults().topology_timeout_ms;
  uint32_t handshake_timeout_ms = detail::master_defaults().handshake_timeout_ms;
  uint32_t io_threads = detail::master_defaults().io_threads;
  std::string journal_path = detail::or_empty(detail::master_defaults().journal_path);
};

class Master {
 public:
  explicit Master(const MasterOptions& options = {}) {
    lh_master_options o;
    lh_master_options_init(&o);
    o.listen_address = options.listen_address.c_str();
    o.secret = detail::c_str_or_null(options.secret);
    o.tls_cert_file = detail::c_str_or_null(options.tls_cert_file);
    o.tls_key_file = detail::c_str_or_null(options.tls_key_file);
    o.heartbeat_interval_ms = options.heartbeat_interval_ms;
    o.heartbeat_misses = options.heartbeat_misses;
    o.topology_timeout_ms = options.topology_timeout_ms;
    o.handshake_timeout_ms = options.handshake_timeout_ms;
    o.io_threads = options.io_threads;
    o.journal_path = detail::c_str_or_null(options.journal_path);
    lh_master* raw = nullptr;
    detail::check(lh_master_create(&o, &raw), lh_last_error);
    handle_.reset(raw);
  }

  // Starts serving peers in the background.
  void run() {
    detail::check(lh_master_run(get()), [this] { return lh_master_last_error(get()); });
  }
  void stop() {
    detail::check(lh_master_stop(get()), [this] { return lh_master_last_error(get()); });
  }
  uint16_t port() const {
    uint16_t p = 0;
    detail::check(lh_master_port(handle_.get(), &p),
                  [this] { return lh_master_last_error(handle_.get()); });
    return p;
  }
  lh_master* get() const { return handle_.get(); }

 private:
  struct Deleter {
    void operator()(lh_master* m) const { lh_master_destroy(m); }
  };
  std::unique_ptr<lh_master, Deleter> handle_;
};

// The lh_dtype of an element type (f16/bf16 have no standard C++ type: pass the lh_dtype).
template <class T>
constexpr lh_dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return LH_DTYPE_F32;
  else if constexpr (std::is_same_v<T, double>)
    return LH_DTYPE_F64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return LH_DTYPE_I8;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return LH_DTYPE_U8;
  else if constexpr (std::is_same_v<T, int32_t>)
    return LH_DTYPE_I32;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return LH_DTYPE_U32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return LH_DTYPE_I64;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return LH_DTYPE_U64;
  else
    static_assert(sizeof(T) == 0, "no lh_dtype for this element type");
}

// Mirrors lh_reduce_op.
enum class ReduceOp {
  kSum = LH_OP_SUM,
  kAvg = LH_OP_AVG,
  kMin = LH_OP_MIN,
  kMax = LH_OP_MAX,
  kProd = LH_OP_PROD,
};

// Mirrors lh_allreduce_options; the defaults are read from lh_allreduce_options_init (the fields'
// meanings and defaults are documented there).
struct AllReduceOptions {
  lh_codec codec = detail::allreduce_defaults().codec;
  uint32_t block = detail::allreduce_defaults().block;
  lh_schedule schedule = detail::allreduce_defaults().schedule;
  // Error feedback: empty (the default) is off; else exactly as many floats as the all-reduce has
  // elements, zeroed before the first call, the caller's memory.
  std::span<float> residual{};
  uint32_t segment_bytes = detail::allreduce_defaults().segment_bytes;
  bool restore_input = detail::allreduce_defaults().restore_input != 0;
  // Where the spans' memory lives (lh_memory in longhaul.h): detected by default; device memory
  // (CUDA) is staged through pinned host memory.
  lh_memory memory = LH_MEMORY_AUTO;
  // 0: none; else the operation fails with LH_ERR_TIMEOUT here after this long (others: ABORTED).
  uint32_t timeout_ms = detail::allreduce_defaults().timeout_ms;

  // Throws LH_ERR_INVALID_ARGUMENT unless the residual is off or has `count` elements.
  void check_residual(size_t count) const {
    if (!residual.empty() && residual.size() != count)
      throw Error(LH_ERR_INVALID_ARGUMENT, "the residual must have as many elements as the data");
  }
  lh_allreduce_options c_options() const {
    lh_allreduce_options o;
    lh_allreduce_options_init(&o);
    o.codec = codec;
    o.block = block;
    o.schedule = schedule;
    o.residual = residual.empty() ? nullptr : residual.data();
    o.segment_bytes = segment_bytes;
    o.restore_input = restore_input ? 1 : 0;
    o.memory = memory;
    o.timeout_ms = timeout_ms;
    return o;
  }
};

// One all-reduce in flight (an lh_op), from Communicator::allreduce_async. Move-only RAII owner:
// its destructor waits for the operation if it still runs (the buffers stay in use until then),
// then frees it. It may outlive its Communicator (destroying the communicator fails the
// operations still in flight with LH_ERR_CLOSED). test(), wait() and info() may be called from
// any thread, any number of times.
class Operation {
 public:
  Operation(Operation&&) noexcept = default;
  Operation& operator=(Operation&&) noexcept = default;

  // True once the operation has completed (wait() then returns or throws at once).
  bool test() const {
    int done = 0;
    check(lh_op_test(get(), &done));
    return done != 0;
  }
  // Blocks until the operation completes; throws Error with its status if it failed (the send
  // buffer is then intact, the receive buffer unspecified: see lh_allreduce_async).
  void wait() const { check(lh_op_wait(get())); }
  // Fails the operation for the group unless it completed already (lh_op_cancel); returns at
  // once, and wait() then throws with LH_ERR_ABORTED, or returns where it had finished first.
  void cancel() const { check(lh_op_cancel(get())); }
  // Bytes moved, the world size and the schedule (final once completed).
  lh_op_info info() const {
    lh_op_info i{};
    check(lh_op_get_info(get(), &i));
    return i;
  }
  lh_op* get() const { return handle_.get(); }

 private:
  friend class Communicator;
  explicit Operation(lh_op* op) : handle_(op) {}
  struct Deleter {
    void operator()(lh_op* op) const { lh_op_destroy(op); }
  };
  void check(lh_status s) const {
    detail::check(s, [this] { return lh_op_last_error(handle_.get()); });
  }
  std::unique_ptr<lh_op, Deleter> handle_;
};

// Mirrors lh_sparse_allgather_options; the defaults are read from
// lh_sparse_allgather_options_init (the fields' meanings and defaults are documented there).
struct SparseAllGatherOptions {
  lh_schedule schedule = detail::sparse_allgather_defaults().schedule;
  uint32_t segment_bytes = detail::sparse_allgather_defaults().segment_bytes;
  lh_sparse_validate validate = detail::sparse_allgather_defaults().validate;
  uint64_t expected_elements = detail::sparse_allgather_defaults().expected_elements;
  uint64_t max_total_bytes = detail::sparse_allgather_defaults().max_total_bytes;
  // The blocking Communicator::sparse_allgather only: >= 1 settles it with the group.
  uint32_t max_attempts = detail::sparse_allgather_defaults().max_attempts;

  lh_sparse_allgather_options c_options() const {
    lh_sparse_allgather_options o;
    lh_sparse_allgather_options_init(&o);
    o.schedule = schedule;
    o.segment_bytes = segment_bytes;
    o.validate = validate;
    o.expected_elements = expected_elements;
    o.max_total_bytes = max_total_bytes;
    o.max_attempts = max_attempts;
    return o;
  }
};

// Every member's contribution of one sparse all-gather (an lh_sparse_gathered), from
// Communicator::sparse_allgather(_async). Move-only RAII owner: its destructor waits for the
// operation if it still runs, then frees the bytes. Readable once the operation has completed
// successfully (until then, and after a failure, every reader throws Error). Thread-safe readers.
class SparseGathered {
 public:
  SparseGathered(SparseGathered&&) noexcept = default;
  SparseGathered& operator=(SparseGathered&&) noexcept = default;

  // The group's size the all-gather ran with, and this member's ring position in it.
  size_t members() const {
    uint32_t n = 0, r = 0;
    check(lh_sparse_gathered_members(get(), &n, &r));
    return n;
  }
  size_t rank() const {
    uint32_t n = 0, r = 0;
    check(lh_sparse_gathered_members(get(), &n, &r));
    return r;
  }
  // The contribution of the member at ring position `r` (valid as long as this object).
  std::span<const std::byte> contribution(size_t r) const {
    const void* data = nullptr;
    size_t bytes = 0;
    check(lh_sparse_gathered_contribution(get(), static_cast<uint32_t>(r), &data, &bytes));
    return {static_cast<const std::byte*>(data), bytes};
  }
  std::span<const std::byte> operator[](size_t r) const { return contribution(r); }
  // The peer id at ring position `r` in the all-gather's epoch.
  uint64_t peer_id(size_t r) const {
    uint64_t id = 0;
    check(lh_sparse_gathered_peer_id(get(), static_cast<uint32_t>(r), &id));
    return id;
  }
  // Whether the contribution at ring position `r` was accepted (always, without validation);
  // if not and `why` is set, the reason, naming the member.
  bool accepted(size_t r, std::string* why = nullptr) const {
    const lh_status s = lh_sparse_gathered_check(get(), static_cast<uint32_t>(r));
    if (s == LH_OK) return true;
    if (s != LH_ERR_PROTOCOL) check(s);
    if (why) *why = detail::or_empty(lh_sparse_gathered_last_error(get()));
    return false;
  }
  // The ring positions whose contribution was refused, in ring order.
  std::vector<uint32_t> malformed() const {
    size_t count = 0;
    check(lh_sparse_gathered_malformed(get(), nullptr, 0, &count));
    std::vector<uint32_t> ranks(count);
    check(lh_sparse_gathered_malformed(get(), ranks.data(), ranks.size(), &count));
    ranks.resize(std::min(count, ranks.size()));
    return ranks;
  }
  lh_sparse_gathered* get() const { return handle_.get(); }

 private:
  friend class Communicator;
  explicit SparseGathered(lh_sparse_gathered* g) : handle_(g) {}
  struct Deleter {
    void operator()(lh_sparse_gathered* g) const { lh_sparse_gathered_destroy(g); }
  };
  void check(lh_status s) const {
    detail::check(s, [this] { return lh_sparse_gathered_last_error(handle_.get()); });
  }
  std::unique_ptr<lh_sparse_gathered, Deleter> handle_;
};

// Thrown by Communicator::sparse_allgather when validation refused contributions
// (LH_ERR_PROTOCOL): every member throws it alike, naming the same members. It holds the result
// (every contribution, the refused ones included) for the caller to go on without them.
class MalformedContributions : public Error {
 public:
  MalformedContributions(const std::string& message, SparseGathered gathered)
      : Error(LH_ERR_PROTOCOL, message),
        gathered_(std::make_shared<SparseGathered>(std::move(gathered))) {}
  const SparseGathered& gathered() const { return *gathered_; }
  // The refused members' ring positions.
  std::vector<uint32_t> ranks() const { return gathered_->malformed(); }

 private:
  std::shared_ptr<SparseGathered> gathered_;  // shared: exceptions are copied
};

// From Communicator::sparse_allgather_async: the operation to wait on, and the result it fills
// (readable once `operation` has completed successfully). `gathered`'s destructor waits for the
// operation, so both may simply go out of scope.
struct SparseAllGatherAsync {
  Operation operation;
  SparseGathered gathered;
};

// Mirrors lh_comm_options; the defaults are read from lh_comm_options_init (the fields' meanings
// and defaults are documented there). Empty strings stand for NULL.
struct CommunicatorOptions {
  std::string master_address = detail::or_empty(detail::comm_defaults().master_address);
  uint32_t peer_group = detail::comm_defaults().peer_group;
  uint32_t connections_per_link = detail::comm_defaults().connections_per_link;
  std::string secret = detail::or_empty(detail::comm_defaults().secret);
  bool use_tls = detail::comm_defaults().use_tls != 0;
  std::string tls_cert_file = detail::or_empty(detail::comm_defaults().tls_cert_file);
  std::string tls_key_file = detail::or_empty(detail::comm_defaults().tls_key_file);
  std::string tls_ca_file = detail::or_empty(detail::comm_defaults().tls_ca_file);
  std::string listen_address = detail::or_empty(detail::comm_defaults().listen_address);
  std::string advertised_address = detail::or_empty(detail::comm_defaults().advertised_address);
  uint32_t connect_timeout_ms = detail::comm_defaults().connect_timeout_ms;
  uint32_t link_timeout_ms = detail::comm_defaults().link_timeout_ms;
  uint32_t handshake_timeout_ms = detail::comm_defaults().handshake_timeout_ms;
  uint32_t io_threads = detail::comm_defaults().io_threads;
  bool full_mesh = detail::comm_defaults().full_mesh != 0;
  uint32_t state_stall_timeout_ms = detail::comm_defaults().state_stall_timeout_ms;
  std::string node = detail::or_empty(detail::comm_defaults().node);
  uint32_t node_rail = detail::comm_defaults().node_rail;
  uint32_t node_rails = detail::comm_defaults().node_rails;
  uint32_t master_reconnect_timeout_ms = detail::comm_defaults().master_reconnect_timeout_ms;
  uint32_t link_upload_mbit = detail::comm_defaults().link_upload_mbit;
  uint32_t min_peers = detail::comm_defaults().min_peers;
  std::string tcp_congestion = detail::or_empty(detail::comm_defaults().tcp_congestion);
};

class Communicator {
 public:
  // Called on a library thread when the master aborts the group's in-flight operations, and when
  // the communicator fails; must not block. See lh_abort_callback.
  using AbortHandler =
      std::function<void(uint64_t epoch, lh_status status, const std::string& reason)>;

  explicit Communicator(const CommunicatorOptions& options) {
    lh_comm_options o;
    lh_comm_options_init(&o);
    o.master_address = options.master_address.c_str();
    o.peer_group = options.peer_group;
    o.connections_per_link = options.connections_per_link;
    o.secret = detail::c_str_or_null(options.secret);
    o.use_tls = options.use_tls ? 1 : 0;
    o.tls_cert_file = detail::c_str_or_null(options.tls_cert_file);
    o.tls_key_file = detail::c_str_or_null(options.tls_key_file);
    o.tls_ca_file = detail::c_str_or_null(options.tls_ca_file);
    o.listen_address = options.listen_address.c_str();
    o.advertised_address = detail::c_str_or_null(options.advertised_address);
    o.connect_timeout_ms = options.connect_timeout_ms;
    o.link_timeout_ms = options.link_timeout_ms;
    o.handshake_timeout_ms = options.handshake_timeout_ms;
    o.io_threads = options.io_threads;
    o.full_mesh = options.full_mesh ? 1 : 0;
    o.state_stall_timeout_ms = options.state_stall_timeout_ms;
    o.link_upload_mbit = options.link_upload_mbit;
    o.node = detail::c_str_or_null(options.node);
    o.node_rail = options.node_rail;
    o.node_rails = options.node_rails;
    o.master_reconnect_timeout_ms = options.master_reconnect_timeout_ms;
    o.min_peers = options.min_peers;
    o.tcp_congestion = detail::c_str_or_null(options.tcp_congestion);
    lh_comm* raw = nullptr;
    detail::check(lh_comm_create(&o, &raw), lh_last_error);
    handle_.reset(raw);
  }

  // Set before connect(). The handler lives as long as the communicator.
  void on_abort(AbortHandler handler) {
    abort_handler_ = std::make_unique<AbortHandler>(std::move(handler));
    check(lh_comm_set_abort_callback(get(), &Communicator::abort_trampoline, abort_handler_.get()));
  }

  // Blocks until admitted, and until the group has options.min_peers members (see
  // lh_comm_connect). Throws Error: LH_ERR_TIMEOUT, LH_ERR_AUTH, ...
  void connect() { check(lh_comm_connect(get())); }
  // Blocks until the group has `n` members, admitting joiners meanwhile, or throws Error with
  // LH_ERR_TIMEOUT once `timeout_ms` passed (the communicator stays usable; see
  // lh_comm_wait_for_peers). LH_ERR_CLOSED before connect() and after leave().
  void wait_for_peers(uint32_t n, uint32_t timeout_ms) {
    check(lh_comm_wait_for_peers(get(), n, timeout_ms));
  }
  // Blocks until the next epoch, or returns at once if nothing changes (see
  // lh_comm_update_topology).
  void update_topology() { check(lh_comm_update_topology(get())); }
  // Thread-safe; no network round trip.
  bool peers_pending() const {
    int pending = 0;
    check(lh_comm_are_peers_pending(get(), &pending));
    return pending != 0;
  }
  void leave(const std::string& reason = {}) {
    check(lh_comm_leave(get(), detail::c_str_or_null(reason)));
  }

  int64_t attribute(lh_attribute a) const {
    int64_t v = 0;
    check(lh_comm_get_attribute(get(), a, &v));
    return v;
  }
  int64_t world_size() const { return attribute(LH_ATTR_WORLD_SIZE); }
  int64_t group_world_size() const { return attribute(LH_ATTR_GROUP_WORLD_SIZE); }
  int64_t rank() const { return attribute(LH_ATTR_RANK); }
  uint64_t epoch() const { return static_cast<uint64_t>(attribute(LH_ATTR_EPOCH)); }
  int64_t group_count() const { return attribute(LH_ATTR_GROUP_COUNT); }
  uint64_t peer_id() const { return static_cast<uint64_t>(attribute(LH_ATTR_PEER_ID)); }

  // This group's ring, as peer ids in ring order.
  std::vector<uint64_t> ring() const {
    std::vector<uint64_t> ids(8);
    for (;;) {
      size_t n = 0;
      check(lh_comm_get_ring(get(), ids.data(), ids.size(), &n));
      if (n <= ids.size()) {
        ids.resize(n);
        return ids;
      }
      ids.resize(n);
    }
  }
  // Copies the ring into `out` (no allocation); returns how many ids the ring has.
  size_t ring(std::span<uint64_t> out) const {
    size_t n = 0;
    check(lh_comm_get_ring(get(), out.data(), out.size(), &n));
    return n;
  }

  // Bytes sent and received so far by kind of link (see lh_comm_get_traffic). Thread-safe.
  lh_traffic traffic() const {
    lh_traffic t{};
    check(lh_comm_get_traffic(get(), &t));
    return t;
  }

  // All-reduce of `send` into `recv` (the same length; the same span for in place) over the
  // group's ring; blocks until done and returns what it moved. Throws Error on failure: `send`
  // is then intact, `recv` unspecified (lh_allreduce_async says which errors to retry).
  // Thread-safe with respect to other collectives, not to update_topology().
  template <class T>
  lh_op_info allreduce(std::span<const std::type_identity_t<T>> send, std::span<T> recv,
                       ReduceOp op = ReduceOp::kSum, const AllReduceOptions& options = {}) {
    check_same_size(send.size(), recv.size());
    options.check_residual(recv.size());
    const lh_allreduce_options o = options.c_options();
    lh_op_info info{};
    detail::check(lh_allreduce(get(), send.data(), recv.data(), recv.size(), dtype_of<T>(),
                               static_cast<lh_reduce_op>(op), &o, &info),
                  lh_last_error);
    return info;
  }
  // In place.
  template <class T>
  lh_op_info allreduce(std::span<T> data, ReduceOp op = ReduceOp::kSum,
                       const AllReduceOptions& options = {}) {
    return allreduce<T>(data, data, op, options);
  }

  // Starts an all-reduce and returns at once (lh_allreduce_async); the buffers (and the
  // residual) must stay valid and untouched until the Operation has completed. Throws Error for
  // invalid arguments (nothing was sent).
  template <class T>
  Operation allreduce_async(std::span<const std::type_identity_t<T>> send, std::span<T> recv,
                            ReduceOp op = ReduceOp::kSum, const AllReduceOptions& options = {}) {
    check_same_size(send.size(), recv.size());
    options.check_residual(recv.size());
    const lh_allreduce_options o = options.c_options();
    lh_op* raw = nullptr;
    detail::check(lh_allreduce_async(get(), send.data(), recv.data(), recv.size(), dtype_of<T>(),
                                     static_cast<lh_reduce_op>(op), &o, &raw),
                  lh_last_error);
    return Operation(raw);
  }
  // In place.
  template <class T>
  Operation allreduce_async(std::span<T> data, ReduceOp op = ReduceOp::kSum,
                            const AllReduceOptions& options = {}) {
    return allreduce_async<T>(data, data, op, options);
  }

  // All-reduces every buffer in place as one all-or-nothing batch for the whole group, retrying
  // over the survivors up to `max_attempts` attempts in all (lh_allreduce_batch). A residual needs
  // a batch of one buffer. Throws Error on failure; the buffers then hold what they held on entry.
  template <class T>
  void allreduce_batch(std::span<const std::span<T>> buffers, uint32_t max_attempts,
                       ReduceOp op = ReduceOp::kSum, const AllReduceOptions& options = {}) {
    std::vector<const void*> sends;
    std::vector<void*> recvs;
    std::vector<size_t> counts;
    for (const std::span<T>& b : buffers) {
      sends.push_back(b.data());
      recvs.push_back(b.data());
      counts.push_back(b.size());
    }
    // A residual with several buffers is the C layer's to refuse (with its reason).
    if (counts.size() == 1) options.check_residual(counts[0]);
    const lh_allreduce_options o = options.c_options();
    detail::check(
        lh_allreduce_batch(get(), sends.data(), recvs.data(), counts.data(), counts.size(),
                           dtype_of<T>(), static_cast<lh_reduce_op>(op), &o, max_attempts),
        lh_last_error);
  }

  // The other collectives (longhaul.h has their contracts: all or nothing for each caller, counts
  // and roots by ring position, the same order on every member). Each blocking form returns what
  // the operation moved and throws Error on failure; each _async form returns an Operation whose
  // buffers must stay valid and untouched until it has completed. `counts` (empty: every member's
  // part has the size of this member's) holds one entry per member of the group.

  // Reduce-scatter: `send` holds every member's part in ring order; `recv` receives this
  // member's, reduced with `op`. `recv` is written only on success.
  template <class T>
  lh_op_info reduce_scatter(std::span<const std::type_identity_t<T>> send, std::span<T> recv,
                            ReduceOp op = ReduceOp::kSum, const AllReduceOptions& options = {},
                            std::span<const size_t> counts = {}) {
    lh_op_info info{};
    const lh_allreduce_options o = scatter_options(send.size(), recv.size(), counts, options);
    check(lh_reduce_scatter(get(), send.data(), recv.data(), recv.size(), counts_or_null(counts),
                            dtype_of<T>(), static_cast<lh_reduce_op>(op), &o, &info));
    return info;
  }
  template <class T>
  Operation reduce_scatter_async(std::span<const std::type_identity_t<T>> send, std::span<T> recv,
                                 ReduceOp op = ReduceOp::kSum, const AllReduceOptions& options = {},
                                 std::span<const size_t> counts = {}) {
    lh_op* raw = nullptr;
    const lh_allreduce_options o = scatter_options(send.size(), recv.size(), counts, options);
    check(lh_reduce_scatter_async(get(), send.data(), recv.data(), recv.size(),
                                  counts_or_null(counts), dtype_of<T>(),
                                  static_cast<lh_reduce_op>(op), &o, &raw));
    return Operation(raw);
  }

  // All-gather: every member's `send` ends in `recv`, in ring order (quantized: each encoded once).
  template <class T>
  lh_op_info allgather(std::span<const std::type_identity_t<T>> send, std::span<T> recv,
                       const AllReduceOptions& options = {}, std::span<const size_t> counts = {}) {
    lh_op_info info{};
    check_gathered(send.size(), recv.size(), counts);
    const lh_allreduce_options o = options.c_options();
    check(lh_allgather(get(), send.data(), send.size(), recv.data(), counts_or_null(counts),
                       dtype_of<T>(), &o, &info));
    return info;
  }
  template <class T>
  Operation allgather_async(std::span<const std::type_identity_t<T>> send, std::span<T> recv,
                            const AllReduceOptions& options = {},
                            std::span<const size_t> counts = {}) {
    lh_op* raw = nullptr;
    check_gathered(send.size(), recv.size(), counts);
    const lh_allreduce_options o = options.c_options();
    check(lh_allgather_async(get(), send.data(), send.size(), recv.data(), counts_or_null(counts),
                             dtype_of<T>(), &o, &raw));
    return Operation(raw);
  }

  // Broadcast: the root's `data` ends in `data` on every member.
  template <class T>
  lh_op_info broadcast(std::span<T> data, uint32_t root, const AllReduceOptions& options = {}) {
    lh_op_info info{};
    const lh_allreduce_options o = options.c_options();
    check(lh_broadcast(get(), data.data(), data.size(), dtype_of<T>(), root, &o, &info));
    return info;
  }
  template <class T>
  Operation broadcast_async(std::span<T> data, uint32_t root,
                            const AllReduceOptions& options = {}) {
    lh_op* raw = nullptr;
    const lh_allreduce_options o = options.c_options();
    check(lh_broadcast_async(get(), data.data(), data.size(), dtype_of<T>(), root, &o, &raw));
    return Operation(raw);
  }

  // Barrier: returns once every member of the group has entered it.
  lh_op_info barrier(const AllReduceOptions& options = {}) {
    lh_op_info info{};
    const lh_allreduce_options o = options.c_options();
    check(lh_barrier(get(), &o, &info));
    return info;
  }
  Operation barrier_async(const AllReduceOptions& options = {}) {
    lh_op* raw = nullptr;
    const lh_allreduce_options o = options.c_options();
    check(lh_barrier_async(get(), &o, &raw));
    return Operation(raw);
  }

  // Sparse all-gather (lh_sparse_allgather): every member contributes `send`, of any size (the
  // sizes are exchanged), and every member receives every contribution in ring order. Blocks;
  // throws MalformedContributions when validation refused some (with the result), Error on any
  // other failure. `info` (may be null) gets the bytes of both all-gathers.
  SparseGathered sparse_allgather(std::span<const std::byte> send,
                                  const SparseAllGatherOptions& options = {},
                                  lh_op_info* info = nullptr) {
    const lh_sparse_allgather_options o = options.c_options();
    lh_sparse_gathered* raw = nullptr;
    const lh_status s = lh_sparse_allgather(get(), send.data(), send.size(), &o, &raw, info);
    if (s == LH_ERR_PROTOCOL && raw)
      throw MalformedContributions(detail::or_empty(lh_last_error()), SparseGathered(raw));
    check(s);
    return SparseGathered(raw);
  }
  // The async form (lh_sparse_allgather_async): waits for the size exchange, then returns the
  // operation and its result. `send` must stay valid and unchanged until the operation completed.
  // Refusals are read from the result (SparseGathered::malformed()), not thrown by wait().
  SparseAllGatherAsync sparse_allgather_async(std::span<const std::byte> send,
                                              const SparseAllGatherOptions& options = {}) {
    const lh_sparse_allgather_options o = options.c_options();
    lh_sparse_gathered* gathered = nullptr;
    lh_op* raw = nullptr;
    check(lh_sparse_allgather_async(get(), send.data(), send.size(), &o, &gathered, &raw));
    return {Operation(raw), SparseGathered(gathered)};
  }

  lh_comm* get() const { return handle_.get(); }

 private:
  struct Deleter {
    void operator()(lh_comm* c) const { lh_comm_destroy(c); }
  };
  static const size_t* counts_or_null(std::span<const size_t> counts) {
    return counts.empty() ? nullptr : counts.data();
  }
  static size_t sum(std::span<const size_t> counts) {
    size_t s = 0;
    for (size_t c : counts) s += c;
    return s;
  }
  // The sizes the spans must have; the C layer checks the counts against the group.
  lh_allreduce_options scatter_options(size_t send, size_t recv, std::span<const size_t> counts,
                                       const AllReduceOptions& options) const {
    const size_t whole =
        counts.empty() ? recv * static_cast<size_t>(group_world_size()) : sum(counts);
    if (send != whole)
      throw Error(LH_ERR_INVALID_ARGUMENT,
                  "send must hold every member's part of the reduce-scatter");
    options.check_residual(send);
    return options.c_options();
  }
  void check_gathered(size_t send, size_t recv, std::span<const size_t> counts) const {
    const size_t whole =
        counts.empty() ? send * static_cast<size_t>(group_world_size()) : sum(counts);
    if (recv != whole)
      throw Error(LH_ERR_INVALID_ARGUMENT, "recv must hold every member's contribution");
  }
  static void check_same_size(size_t send, size_t recv) {
    if (send != recv)
      throw Error(LH_ERR_INVALID_ARGUMENT, "send and recv must have the same number of elements");
  }
  void check(lh_status s) const {
    detail::check(s, [this] { return lh_comm_last_error(handle_.get()); });
  }
  static void abort_trampoline(void* user, uint64_t epoch, lh_status status, const char* reason) {
    (*static_cast<AbortHandler*>(user))(epoch, status, reason ? reason : "");
  }

  // Declared before the handle so it outlives it (the handle's destructor may still call it).
  std::unique_ptr<AbortHandler> abort_handler_;
  std::unique_ptr<lh_comm, Deleter> handle_;
};

// The local group of a communicator's node (lh_local_group): the node's ranks reducing among
// themselves through shared memory, for the hierarchical all-reduce. Move-only RAII owner;
// destroy it before its Communicator.
//
//   longhaul::LocalGroup local(comm);        // blocks until every rank of the node has come
//   local.allreduce(std::span(grads), 3);    // node, then rails, then node again; all or nothing
struct LocalGroupOptions {
  std::string name;  // empty: derived from the master's address and the node's name
  size_t slot_bytes = size_t{4} << 20;
  uint32_t timeout_ms = 120000;
  // Set: the local steps run in NCCL on this CUDA device (-1: the current one), and every buffer
  // must be device memory (lh_local_group_options.memory = LH_MEMORY_CUDA). Unset: shared memory.
  std::optional<int> cuda_device;
};

class LocalGroup {
 public:
  explicit LocalGroup(Communicator& comm, const LocalGroupOptions& options = {}) {
    lh_local_group_options o;
    lh_local_group_options_init(&o);
    o.name = detail::c_str_or_null(options.name);
    o.slot_bytes = options.slot_bytes;
    o.timeout_ms = options.timeout_ms;
    if (options.cuda_device) {
      o.memory = LH_MEMORY_CUDA;
      o.device = *options.cuda_device;
    }
    lh_local_group* raw = nullptr;
    detail::check(lh_local_group_create(comm.get(), &o, &raw), lh_last_error);
    handle_.reset(raw);
  }

  // lh_node_allreduce in place, retried over the survivors up to `max_attempts` attempts. Throws
  // Error on failure (status LH_ERR_NODE_EVICTED: the node is finished); the buffer then holds
  // what it held on entry.
  template <class T>
  void allreduce(std::span<T> data, uint32_t max_attempts, ReduceOp op = ReduceOp::kSum,
                 const AllReduceOptions& options = {}) {
    options.check_residual(data.size());
    const lh_allreduce_options o = options.c_options();
    detail::check(lh_node_allreduce(handle_.get(), data.data(), data.data(), data.size(),
                                    dtype_of<T>(), static_cast<lh_reduce_op>(op), &o, max_attempts),
                  lh_last_error);
  }

  // Ends the group on every rank of the node (lh_local_group_abort). Thread-safe.
  void abort(const std::string& reason) {
    detail::check(lh_local_group_abort(handle_.get(), reason.c_str()), lh_last_error);
  }

  lh_local_group* get() const { return handle_.get(); }

 private:
  struct Deleter {
    void operator()(lh_local_group* g) const { lh_local_group_destroy(g); }
  };
  std::unique_ptr<lh_local_group, Deleter> handle_;
};

// Mirrors lh_sync_strategy.
enum class SyncStrategy {
  kEnforcePopular = LH_SYNC_ENFORCE_POPULAR,
  kReceiveOnly = LH_SYNC_RECEIVE_ONLY,
  kSendOnly = LH_SYNC_SEND_ONLY,
};

// Shared state: named tensors in the caller's memory, kept bit-identical across the peer group by
// sync() (see lh_sync_state). Move-only RAII owner of an lh_state.
//
//   longhaul::State state;
//   state.add("weights", std::span(weights));
//   state.add("step", std::span(&step, 1));
//   lh_sync_info info = state.sync(comm);  // a joiner: state.sync(comm,
//   SyncStrategy::kReceiveOnly)
class State {
 public:
  State() {
    lh_state* raw = nullptr;
    detail::check(lh_state_create(&raw), lh_last_error);
    handle_.reset(raw);
  }

  // Registers a tensor; the memory stays the caller's and must outlive the State.
  template <class T>
  void add(const std::string& name, std::span<T> data) {
    add(name, static_cast<void*>(data.data()), data.size(), dtype_of<std::remove_const_t<T>>());
  }
  void add(const std::string& name, void* data, size_t count, lh_dtype dtype) {
    check(lh_state_add_tensor(get(), name.c_str(), data, count, dtype));
  }

  uint64_t revision() const {
    uint64_t r = 0;
    check(lh_state_get_revision(get(), &r));
    return r;
  }
  void set_revision(uint64_t revision) { check(lh_state_set_revision(get(), revision)); }
  // The state hash (same on every peer holding the same tensors and bytes).
  uint64_t hash() {
    uint64_t h = 0;
    check(lh_state_hash(get(), &h));
    return h;
  }

  // A collective of the communicator's group; throws Error (e.g. LH_ERR_STATE_MISMATCH naming the
  // tensor) on failure.
  lh_sync_info sync(Communicator& comm, SyncStrategy strategy = SyncStrategy::kEnforcePopular) {
    lh_sync_info info{};
    const lh_status s =
        lh_sync_state(comm.get(), get(), static_cast<lh_sync_strategy>(strategy), &info);
    detail::check(s, [this] { return lh_state_last_error(get()); });
    return info;
  }

  lh_state* get() const { return handle_.get(); }

 private:
  struct Deleter {
    void operator()(lh_state* s) const { lh_state_destroy(s); }
  };
  void check(lh_status s) const {
    detail::check(s, [this] { return lh_state_last_error(handle_.get()); });
  }
  std::unique_ptr<lh_state, Deleter> handle_;
};

// The sync engine's options (lh_sync_engine_options); the defaults are the C defaults. The
// ranges are the caller's memory: they must outlive the SyncEngine.
struct SyncEngineOptions {
  std::vector<lh_param_range> ranges;
  std::vector<lh_fragment_piece> pieces;  // empty: range i in fragment i mod fragments
  std::string resume_path;                // empty: a fresh start (lh_sync_engine_options)
  lh_sync_engine_options c;               // everything else, filled by lh_sync_engine_options_init
  SyncEngineOptions() { lh_sync_engine_options_init(&c); }
  // Adds a range of f32 parameters.
  SyncEngineOptions& add(std::span<float> parameters) {
    ranges.push_back({parameters.data(), parameters.size(), LH_DTYPE_F32});
    return *this;
  }
  // Adds a range of bf16 parameters (their bit patterns).
  SyncEngineOptions& add_bf16(std::span<uint16_t> parameters) {
    ranges.push_back({parameters.data(), parameters.size(), LH_DTYPE_BF16});
    return *this;
  }
};

// DiLoCo, Streaming DiLoCo, CO2 and eager outer loops (docs/training.md). Construction is the
// start collective; step() after every inner optimizer step; close() on every peer at the same
// step before leaving. Throws Error on failure.
class SyncEngine {
 public:
  SyncEngine(Communicator& comm, SyncEngineOptions options) {
    options.c.ranges = options.ranges.data();
    options.c.range_count = options.ranges.size();
    options.c.pieces = options.pieces.empty() ? nullptr : options.pieces.data();
    options.c.piece_count = options.pieces.size();
    options.c.resume_path = detail::c_str_or_null(options.resume_path);
    lh_sync_engine* raw = nullptr;
    detail::check(lh_sync_engine_start(comm.get(), &options.c, &raw),
                  [&comm] { return lh_comm_last_error(comm.get()); });
    handle_.reset(raw);
  }

  void step() { check(lh_sync_engine_step(get())); }
  void close() { check(lh_sync_engine_close(get())); }
  // The engine's part of a checkpoint (lh_sync_engine_save).
  void save(const std::string& path) { check(lh_sync_engine_save(get(), path.c_str())); }
  lh_sync_stats stats() const {
    lh_sync_stats s{};
    check(lh_sync_engine_get_stats(get(), &s));
    return s;
  }
  // The peers whose contribution to the last settled round was excluded as non-finite.
  std::vector<uint64_t> last_excluded() const {
    std::vector<uint64_t> ids(64);
    size_t n = 0;
    check(lh_sync_engine_last_excluded(get(), ids.data(), ids.size(), &n));
    ids.resize(std::min(n, ids.size()));
    return ids;
  }
  uint64_t hash() {
    uint64_t h = 0;
    check(lh_sync_engine_hash(get(), &h));
    return h;
  }
  std::vector<float> global(uint32_t fragment, size_t count) {
    std::vector<float> g(count);
    check(lh_sync_engine_get_global(get(), fragment, g.data(), g.size()));
    return g;
  }

  lh_sync_engine* get() const { return handle_.get(); }

 private:
  struct Deleter {
    void operator()(lh_sync_engine* e) const { lh_sync_engine_destroy(e); }
  };
  void check(lh_status s) const {
    detail::check(s, [this] { return lh_sync_engine_last_error(handle_.get()); });
  }
  std::unique_ptr<lh_sync_engine, Deleter> handle_;
};

}  // namespace longhaul

#endif  // LONGHAUL_LONGHAUL_HPP_
