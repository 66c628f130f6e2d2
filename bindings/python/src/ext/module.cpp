// The _longhaul extension module: errors, Master, and the pieces bound in bind_*.cpp.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"
#include "comm.hpp"
#include "errors.hpp"
#include "local_group.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace longhaul::py {
namespace {

void bind_master(nb::module_& m) {
  nb::class_<Master>(m, "Master",
                     "An in-process master: coordinates the run, holds no tensor data. Serves "
                     "from construction until stop() (or the end of a `with` block).")
      .def(
          "__init__",
          [](Master* self, const std::string& listen, std::optional<std::string> secret,
             std::optional<uint32_t> heartbeat_interval_ms,
             std::optional<uint32_t> heartbeat_misses, std::optional<uint32_t> topology_timeout_ms,
             std::optional<uint32_t> handshake_timeout_ms, std::optional<uint32_t> io_threads,
             std::optional<std::string> tls_cert_file, std::optional<std::string> tls_key_file,
             std::optional<std::string> journal_path) {
            lh_master_options o;
            lh_master_options_init(&o);
            o.listen_address = listen.c_str();
            if (secret) o.secret = secret->c_str();
            set_if(o.heartbeat_interval_ms, heartbeat_interval_ms);
            set_if(o.heartbeat_misses, heartbeat_misses);
            set_if(o.topology_timeout_ms, topology_timeout_ms);
            set_if(o.handshake_timeout_ms, handshake_timeout_ms);
            set_if(o.io_threads, io_threads);
            if (tls_cert_file) o.tls_cert_file = tls_cert_file->c_str();
            if (tls_key_file) o.tls_key_file = tls_key_file->c_str();
            if (journal_path) o.journal_path = journal_path->c_str();
            new (self) Master(o);
          },
          "listen"_a = "127.0.0.1:0", nb::kw_only(), "secret"_a = nb::none(),
          "heartbeat_interval_ms"_a = nb::none(), "heartbeat_misses"_a = nb::none(),
          "topology_timeout_ms"_a = nb::none(), "handshake_timeout_ms"_a = nb::none(),
          "io_threads"_a = nb::none(), "tls_cert_file"_a = nb::none(),
          "tls_key_file"_a = nb::none(), "journal_path"_a = nb::none(),
          "Binds `listen` (\"host:port\", port 0 picks a free one) and starts serving. Options "
          "left None take the library's defaults (include/longhaul/longhaul.h, "
          "lh_master_options). ValueError for bad options, LonghaulError (status LH_ERR_IO) when "
          "the address cannot be bound.")
      .def_prop_ro("port", &Master::port, "The port the master listens on.")
      .def_prop_ro("address", &Master::address,
                   "\"host:port\" for peers on this machine (127.0.0.1 when listening on every "
                   "interface).")
      .def("stop", &Master::stop, "Disconnects every peer and stops serving. Idempotent.")
      .def(
          "__enter__", [](nb::handle self) { return nb::borrow(self); },
          nb::sig("def __enter__(self) -> Master"))
      .def(
          "__exit__", [](Master& self, nb::handle, nb::handle, nb::handle) { self.stop(); },
          "exc_type"_a.none(), "exc"_a.none(), "tb"_a.none());
}

}  // namespace
}  // namespace longhaul::py

NB_MODULE(_longhaul, m) {
  using namespace longhaul::py;
  m.doc() = "longhaul's C API for Python (use the `longhaul` package, which re-exports it).";
  register_errors(m);
  m.def(
      "version", [] { return std::string(lh_version()); },
      "The library's version, \"MAJOR.MINOR.PATCH\".");
  m.def(
      "set_log_level", [](const std::string& level) { check(lh_set_log_level(level.c_str())); },
      "level"_a,
      "Sets the process-wide log level: 'debug', 'info', 'warn', 'error' or 'off' (ValueError "
      "otherwise). Logs go to stderr.");
  m.def(
      "secret_from_file",
      [](const std::string& path, bool allow_weak) {
        std::string secret(LH_SECRET_MAX_BYTES + 1, '\0');
        size_t length = 0;
        check(lh_secret_from_file(path.c_str(), allow_weak ? 1 : 0, secret.data(), secret.size(),
                                  &length));
        secret.resize(length);
        return secret;
      },
      "path"_a, "allow_weak"_a = false,
      "The cluster secret in the file at `path`, read with longhaul-master --secret-file's rules "
      "(lh_secret_from_file): one final '\\n' or '\\r\\n' removed, nothing else; the file "
      "mode 600; at least 16 bytes unless allow_weak. Pass it as Communicator(secret=...). "
      "ValueError for a file that breaks a rule (the message says how to fix it), LonghaulError "
      "(LH_ERR_IO) when it cannot be read.");
  bind_master(m);
  bind_comm(m);
  bind_engine(m);
  bind_local_group(m);
}
