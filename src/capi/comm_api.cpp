// lh_comm_*: the C face of peer::Communicator.
#include <atomic>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "capi/handles.hpp"
#include "peer/node_identity.hpp"
#include "peer/wait_for_peers.hpp"

using longhaul::Status;
using longhaul::capi::check_handle;
using longhaul::capi::check_open;
using longhaul::capi::finish;
using longhaul::capi::str;

namespace {
uint32_t to_ms(std::chrono::milliseconds d) {
  return static_cast<uint32_t>(d.count());
}

// The launcher's node identity, read once: lh_comm_options_init hands out its name, which must
// stay valid for the process's life.
const std::optional<longhaul::peer::NodeIdentity>& environment_node() {
  static const auto node = longhaul::peer::node_from_environment();
  return node;
}
}  // namespace

// The kernel's TCP_CA_NAME_MAX less its terminating zero.
constexpr size_t kMaxCongestionName = 15;

// The defaults are peer::CommunicatorOptions's (and the runtime's); nothing is written here.
extern "C" void lh_comm_options_init(lh_comm_options* o) {
  if (!o) return;
  const longhaul::peer::CommunicatorOptions d;
  *o = lh_comm_options{};
  o->peer_group = d.group;
  o->connections_per_link = d.connections_per_link;
  o->use_tls = d.transport.tls.enabled ? 1 : 0;
  o->listen_address = longhaul::peer::kDefaultListenAddress;
  o->connect_timeout_ms = to_ms(d.connect_timeout);
  o->link_timeout_ms = to_ms(d.link_timeout);
  o->handshake_timeout_ms = to_ms(d.transport.handshake_timeout);
  o->io_threads = longhaul::runtime::RuntimeOptions{}.io_threads;
  o->full_mesh = d.full_mesh ? 1 : 0;
  o->state_stall_timeout_ms = to_ms(d.state_stall_timeout);
  o->node = nullptr;
  o->node_rail = d.rail;
  o->node_rails = d.rails;
  o->master_reconnect_timeout_ms = to_ms(d.master_reconnect_timeout);
  o->link_upload_mbit = static_cast<uint32_t>(d.transport.link_rate_bytes_per_s * 8 / 1'000'000);
  o->min_peers = d.min_peers;
  if (const auto& env = environment_node()) {
    o->node = env->node.c_str();
    o->node_rail = env->rail;
    o->node_rails = env->rails;
    o->peer_group = env->rail;
  }
}

extern "C" lh_status lh_comm_create(const lh_comm_options* o, lh_comm** out) {
  namespace lh = longhaul;
  if (!out || !o) return longhaul::capi::null_argument("lh_comm_create");
  *out = nullptr;
  try {
    if (!o->master_address || !*o->master_address)
      return lh::capi::fail(lh::invalid_argument("master_address is required"));
    if (o->connections_per_link == 0 || o->connections_per_link > lh::net::kMaxConnectionsPerLink)
      return lh::capi::fail(lh::invalid_argument(
          fmt::format("connections_per_link must be 1..{}, got {}", lh::net::kMaxConnectionsPerLink,
                      o->connections_per_link)));
    if (o->handshake_timeout_ms == 0)
      return lh::capi::fail(lh::invalid_argument("handshake_timeout_ms must be positive"));
    if (o->min_peers > lh::peer::kMaxWaitPeers)
      return lh::capi::fail(lh::invalid_argument(fmt::format(
          "min_peers must be at most {}, got {}", lh::peer::kMaxWaitPeers, o->min_peers)));
    if (o->tcp_congestion && std::strlen(o->tcp_congestion) > kMaxCongestionName)
      return lh::capi::fail(
          lh::invalid_argument(fmt::format("tcp_congestion must be at most {} bytes, got \"{}\"",
                                           kMaxCongestionName, o->tcp_congestion)));
    lh::peer::CommunicatorOptions options;
    options.master_address = o->master_address;
    options.group = o->peer_group;
    options.connections_per_link = static_cast<uint16_t>(o->connections_per_link);
    options.transport.secret = str(o->secret);
    options.transport.tls.enabled = o->use_tls != 0;
    options.transport.tls.cert_file = str(o->tls_cert_file);
    options.transport.tls.key_file = str(o->tls_key_file);
    options.transport.tls.ca_file = str(o->tls_ca_file);
    options.transport.handshake_timeout = std::chrono::milliseconds(o->handshake_timeout_ms);
    if (o->listen_address) options.listen_address = o->listen_address;
    options.advertised_address = str(o->advertised_address);
    options.connect_timeout = std::chrono::milliseconds(o->connect_timeout_ms);
    options.link_timeout = std::chrono::milliseconds(o->link_timeout_ms);
    options.full_mesh = o->full_mesh != 0;
    options.transport.link_rate_bytes_per_s = uint64_t{o->link_upload_mbit} * 1'000'000 / 8;
    options.state_stall_timeout = std::chrono::milliseconds(o->state_stall_timeout_ms);
    options.node = str(o->node);
    options.rail = o->node_rail;
    options.rails = o->node_rails;
    options.master_reconnect_timeout = std::chrono::milliseconds(o->master_reconnect_timeout_ms);
    options.min_peers = o->min_peers;
    if (o->tcp_congestion && *o->tcp_congestion)
      options.transport.socket.congestion_control = o->tcp_congestion;
    static std::atomic<uint64_t> generations{0};
    auto h = std::make_unique<lh_comm>();
    h->generation = ++generations;
    lh::runtime::RuntimeOptions runtime;
    runtime.io_threads = o->io_threads;  // 0 picks 2; the workers are sized to the machine
    auto peer = lh::peer::Peer::create(options, runtime);
    if (!peer) return lh::capi::fail(peer.status());
    h->impl = std::move(*peer);
    *out = h.release();
    return LH_OK;
  } catch (const std::exception& e) {
    return lh::capi::fail(lh::internal_error(fmt::format("lh_comm_create: {}", e.what())));
  }
}

extern "C" lh_status lh_comm_connect(lh_comm* c) {
  if (lh_status s = check_handle(c, "lh_comm_connect"); s != LH_OK) return s;
  return finish(c, c->impl->connect());
}

extern "C" lh_status lh_comm_wait_for_peers(lh_comm* c, uint32_t n, uint32_t timeout_ms) {
  if (lh_status s = check_handle(c, "lh_comm_wait_for_peers"); s != LH_OK) return s;
  return finish(c, c->impl->wait_for_peers(n, std::chrono::milliseconds(timeout_ms)));
}

extern "C" lh_status lh_comm_update_topology(lh_comm* c) {
  if (lh_status s = check_open(c, "lh_comm_update_topology"); s != LH_OK) return s;
  return finish(c, c->impl->group().update_topology());
}

extern "C" lh_status lh_comm_are_peers_pending(lh_comm* c, int* pending) {
  if (!pending) return longhaul::capi::null_argument("lh_comm_are_peers_pending");
  if (lh_status s = check_handle(c, "lh_comm_are_peers_pending"); s != LH_OK) return s;
  *pending = c->impl->group().peers_pending() ? 1 : 0;
  return LH_OK;
}

extern "C" lh_status lh_comm_get_attribute(lh_comm* c, lh_attribute attribute, int64_t* value) {
  if (!value) return longhaul::capi::null_argument("lh_comm_get_attribute");
  if (lh_status s = check_handle(c, "lh_comm_get_attribute"); s != LH_OK) return s;
  auto& peer = *c->impl;
  const auto view = peer.group().view();
  switch (attribute) {
    case LH_ATTR_WORLD_SIZE:
      *value = static_cast<int64_t>(view.world_size);
      return LH_OK;
    case LH_ATTR_GROUP_WORLD_SIZE:
      *value = static_cast<int64_t>(view.group_world_size);
      return LH_OK;
    case LH_ATTR_RANK:
      *value = static_cast<int64_t>(view.rank);
      return LH_OK;
    case LH_ATTR_EPOCH:
      *value = static_cast<int64_t>(view.epoch);
      return LH_OK;
    case LH_ATTR_GROUP_COUNT:
      *value = static_cast<int64_t>(view.group_count);
      return LH_OK;
    case LH_ATTR_PEER_ID:
      *value = static_cast<int64_t>(view.peer_id);
      return LH_OK;
    case LH_ATTR_ABORT_COUNT:
      *value = static_cast<int64_t>(peer.aborts_seen());
      return LH_OK;
    case LH_ATTR_LISTEN_PORT:
      *value = static_cast<int64_t>(peer.listen_port());
      return LH_OK;
  }
  return finish(c, longhaul::invalid_argument(
                       fmt::format("unknown attribute {}", static_cast<int>(attribute))));
}

extern "C" lh_status lh_comm_get_ring(lh_comm* c, uint64_t* ids, size_t capacity, size_t* count) {
  if (!count || (!ids && capacity > 0)) return longhaul::capi::null_argument("lh_comm_get_ring");
  if (lh_status s = check_handle(c, "lh_comm_get_ring"); s != LH_OK) return s;
  const auto view = c->impl->group().view();
  *count = view.ring.size();
  const size_t n = std::min(capacity, view.ring.size());
  if (n > 0) std::memcpy(ids, view.ring.data(), n * sizeof(uint64_t));
  return LH_OK;
}

extern "C" lh_status lh_comm_get_traffic(lh_comm* c, lh_traffic* traffic) {
  if (!traffic) return longhaul::capi::null_argument("lh_comm_get_traffic");
  if (lh_status s = check_handle(c, "lh_comm_get_traffic"); s != LH_OK) return s;
  const longhaul::peer::TrafficTotals t = c->impl->communicator().traffic();
  traffic->data_sent = t.data_sent;
  traffic->data_received = t.data_received;
  traffic->control_sent = t.control_sent;
  traffic->control_received = t.control_received;
  traffic->state_sent = t.state_sent;
  traffic->state_received = t.state_received;
  return LH_OK;
}

extern "C" lh_status lh_comm_set_abort_callback(lh_comm* c, lh_abort_callback callback,
                                                void* user_data) {
  if (lh_status s = check_handle(c, "lh_comm_set_abort_callback"); s != LH_OK) return s;
  if (!callback) {
    c->impl->communicator().set_abort_handler({});
    return LH_OK;
  }
  c->impl->communicator().set_abort_handler(
      [callback, user_data](uint64_t epoch, const Status& why) {
        callback(user_data, epoch, why.code(), why.message().c_str());
      });
  return LH_OK;
}

extern "C" lh_status lh_comm_leave(lh_comm* c, const char* reason) {
  if (lh_status s = check_handle(c, "lh_comm_leave"); s != LH_OK) return s;
  return finish(c, c->impl->leave(str(reason)));
}

// The handle stays as a tombstone (handles.hpp): a later call on it is LH_ERR_CLOSED.
extern "C" void lh_comm_destroy(lh_comm* c) {
  if (!c || !c->impl) return;
  c->impl.reset();
  longhaul::MutexLock lock(c->mu);
  c->last_error =
      fmt::format("LH_ERR_CLOSED: communicator #{} was destroyed (lh_comm_destroy)", c->generation);
}

extern "C" const char* lh_comm_last_error(const lh_comm* c) {
  if (!c) return "lh_comm_last_error: communicator is NULL";
  longhaul::MutexLock lock(c->mu);
  return c->last_error.c_str();
}
