// lh_master_*: the C face of master::Master.
#include <fmt/format.h>

#include "capi/handles.hpp"
#include "net/endpoint.hpp"

using longhaul::Status;
using longhaul::capi::finish;
using longhaul::capi::str;

// The defaults are master::MasterOptions's; nothing is written here.
extern "C" void lh_master_options_init(lh_master_options* o) {
  if (!o) return;
  const longhaul::master::MasterOptions d;
  *o = lh_master_options{};
  o->listen_address = longhaul::master::kDefaultListenAddress;
  o->heartbeat_interval_ms = static_cast<uint32_t>(d.heartbeat_interval.count());
  o->heartbeat_misses = d.heartbeat_misses;
  o->topology_timeout_ms = static_cast<uint32_t>(d.topology_timeout.count());
  o->handshake_timeout_ms = static_cast<uint32_t>(d.transport.handshake_timeout.count());
  o->io_threads = 0;  // Master::create picks 2
}

extern "C" lh_status lh_master_create(const lh_master_options* o, lh_master** out) {
  namespace lh = longhaul;
  if (!out) return lh::capi::fail(lh::invalid_argument("lh_master_create: out is NULL"));
  *out = nullptr;
  if (!o) return lh::capi::fail(lh::invalid_argument("lh_master_create: options is NULL"));
  try {
    lh::master::MasterOptions options;
    if (Status s = lh::net::parse_host_port(str(o->listen_address), &options.listen_host,
                                            &options.listen_port);
        !s)
      return lh::capi::fail(s.with_context("listen address"));
    options.transport.secret = str(o->secret);
    const bool cert = o->tls_cert_file && *o->tls_cert_file,
               key = o->tls_key_file && *o->tls_key_file;
    if (cert != key)
      return lh::capi::fail(lh::invalid_argument("TLS needs both a certificate and a key file"));
    options.transport.tls.enabled = cert;
    options.transport.tls.cert_file = str(o->tls_cert_file);
    options.transport.tls.key_file = str(o->tls_key_file);
    if (o->handshake_timeout_ms == 0)
      return lh::capi::fail(lh::invalid_argument("handshake_timeout_ms must be positive"));
    options.transport.handshake_timeout = std::chrono::milliseconds(o->handshake_timeout_ms);
    options.heartbeat_interval = std::chrono::milliseconds(o->heartbeat_interval_ms);
    options.heartbeat_misses = o->heartbeat_misses;
    options.topology_timeout = std::chrono::milliseconds(o->topology_timeout_ms);
    if (o->journal_path) options.journal_path = o->journal_path;
    auto master = lh::master::Master::create(options, o->io_threads);
    if (!master) return lh::capi::fail(master.status());
    auto* h = new lh_master();
    h->impl = std::move(*master);
    *out = h;
    return LH_OK;
  } catch (const std::exception& e) {
    return lh::capi::fail(lh::internal_error(fmt::format("lh_master_create: {}", e.what())));
  }
}

extern "C" lh_status lh_master_run(lh_master* m) {
  if (!m) return longhaul::capi::fail(longhaul::invalid_argument("lh_master_run: master is NULL"));
  if (m->stopped) return finish(m, longhaul::closed_error("the master was stopped"));
  m->impl->run();
  return LH_OK;
}

extern "C" lh_status lh_master_port(const lh_master* m, uint16_t* port) {
  if (!m || !port)
    return longhaul::capi::fail(longhaul::invalid_argument("lh_master_port: NULL argument"));
  *port = m->impl->port();
  return LH_OK;
}

extern "C" lh_status lh_master_stop(lh_master* m) {
  if (!m) return longhaul::capi::fail(longhaul::invalid_argument("lh_master_stop: master is NULL"));
  m->stopped = true;
  m->impl->stop();
  return LH_OK;
}

extern "C" void lh_master_destroy(lh_master* m) {
  delete m;
}

extern "C" const char* lh_master_last_error(const lh_master* m) {
  if (!m) return "lh_master_last_error: master is NULL";
  longhaul::MutexLock lock(m->mu);
  return m->last_error.c_str();
}
