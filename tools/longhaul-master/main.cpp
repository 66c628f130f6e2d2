// longhaul-master: the coordination daemon of a longhaul training run.
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <asio/ip/address.hpp>

#include "common/log.hpp"
#include "common/secret_file.hpp"
#include "master/master.hpp"
#include "status_endpoints.hpp"
#include "tool_cli.hpp"

namespace {

using longhaul::Status;
namespace cli = longhaul::cli;

constexpr const char* kDescription =
    R"(longhaul-master: coordinates the peers of a longhaul training run.

Peers (training processes using the longhaul library) connect to the master, which tells
them who is in the run, in which ring order they reduce, and when the membership changes. The
master carries no training data; one small process is enough for the whole run. Peers may join and
leave (or die) at any time; the master notices, tells the survivors, and re-forms the ring.
)";

constexpr const char* kFooter =
    R"(Stop the master with Ctrl-C or SIGTERM; connected peers see it go and fail with LH_ERR_PEER_LOST.

Example:
  (umask 077 && openssl rand -hex 32 > secret)    # 64 hex digits, mode 600
  longhaul-master --listen 0.0.0.0:48484 --secret-file secret)";

Status write_port_file(const std::string& path, uint16_t port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out) return longhaul::io_error(fmt::format("cannot write the port file '{}'", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // atomic: readers never see a half-written file
  if (ec)
    return longhaul::io_error(
        fmt::format("cannot rename '{}' to '{}': {}", tmp, path, ec.message()));
  return Status::ok();
}

// Whether `host` only ever reaches this machine (a loopback address or "localhost").
bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  asio::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  return !ec && address.is_loopback();
}

struct Flags {
  longhaul::master::MasterOptions options;
  std::string listen = "0.0.0.0:48484";
  std::string port_file;
  std::string secret_file;
  bool allow_weak_secret = false;
  std::string log_level = "info";
  std::string log_format = "text";
  unsigned io_threads = 2;
  std::string status_listen = "127.0.0.1:0";
  std::string status_port_file;
  longhaul::ops::HttpOptions status;
};

// Durations in milliseconds as the flags spell them; MasterOptions holds std::chrono types.
struct Timing {
  uint32_t heartbeat_interval_ms, heartbeat_misses, topology_timeout_ms, handshake_timeout_ms;
  uint32_t topology_grace_ms, round_timeout_ms, misbehaviour_backoff_ms, gather_timeout_ms;
  uint32_t state_deadline_floor_ms;
};

// "Network": where the master listens for peers.
void add_network_flags(CLI::App& app, Flags& f) {
  const char* group = "Network";
  app.add_option("--listen", f.listen,
                 "address to accept peers on; port 0 picks a free port, IPv6 "
                 "as [addr]:port")
      ->type_name("HOST:PORT")
      ->group(group);
  app.add_option("--port-file", f.port_file,
                 "after binding, write the port number to PATH (for scripts and tests)")
      ->type_name("PATH")
      ->group(group);
  cli::add_number(app, "--io-threads", f.io_threads, 1, 256, "network threads")->group(group);
}

// "Security": who may join (the cluster secret, TLS).
void add_security_flags(CLI::App& app, Flags& f) {
  const char* group = "Security (use both on any network you do not fully trust)";
  app.add_option("--secret-file", f.secret_file,
                 "file holding the cluster secret: every peer must prove it knows the "
                 "same secret (HMAC challenge-response) or it is refused; without this "
                 "option anyone who can reach the port may join. The secret is the file's "
                 "bytes less one final line ending (\"\\n\" or \"\\r\\n\"; nothing else is "
                 "removed), 16 to 4096 bytes, no NUL; the file must not be accessible to its "
                 "group or others (chmod 600). Peers read the same file with "
                 "lh_secret_from_file, which applies these rules")
      ->type_name("PATH")
      ->group(group);
  app.add_flag("--allow-weak-secret", f.allow_weak_secret,
               "accept a secret file that its group or others may read, or a secret shorter "
               "than 16 bytes (refused otherwise)")
      ->group(group);
  app.add_option("--tls-cert", f.options.transport.tls.cert_file,
                 "PEM certificate; with --tls-key, every connection uses TLS 1.3 and "
                 "peers must enable TLS too")
      ->type_name("PATH")
      ->group(group);
  app.add_option("--tls-key", f.options.transport.tls.key_file, "the certificate's private key")
      ->type_name("PATH")
      ->group(group);
}

// "Failure detection": when a silent or slow member is declared dead.
void add_failure_detection_flags(CLI::App& app, Timing& t) {
  const char* group = "Failure detection";
  cli::add_number(app, "--heartbeat-interval-ms", t.heartbeat_interval_ms, 1, 3'600'000,
                  "heartbeats are exchanged every N ms in both directions")
      ->group(group);
  cli::add_number(app, "--heartbeat-misses", t.heartbeat_misses, 1, 1000,
                  "a peer silent for N intervals is declared dead; a closed socket is "
                  "detected at once, without waiting for heartbeats")
      ->group(group);
  cli::add_number(app, "--topology-timeout-ms", t.topology_timeout_ms, 1, 86'400'000,
                  "peers that have not set up their links N ms after a membership "
                  "change are evicted")
      ->group(group);
  cli::add_number(app, "--topology-grace-ms", t.topology_grace_ms, 1, 86'400'000,
                  "once half of a membership change's peers have set up their links, the rest "
                  "get max(N, 4 x the time the first half took) before they are evicted")
      ->group(group);
  cli::add_number(app, "--round-timeout-ms", t.round_timeout_ms, 1, 86'400'000,
                  "a batch attempt waits N ms for a member's report (a batch member that misses "
                  "it is evicted); a state sync at most N ms (its fetchers N ms plus 1 s per MiB "
                  "planned), less once the group's recent syncs show it needs less")
      ->group(group);
  cli::add_number(app, "--gather-timeout-ms", t.gather_timeout_ms, 1, 86'400'000,
                  "members waiting in update_topology wait at most N ms for the others to come; "
                  "those that have not are evicted")
      ->group(group);
}

// How long a state sync waits for a member, and when one that keeps being late is evicted.
void add_state_pace_flags(CLI::App& app, Flags& f, Timing& t, const char* group) {
  auto& pace = f.options.state_pace;
  cli::add_number(app, "--state-deadline-floor-ms", t.state_deadline_floor_ms, 1, 86'400'000,
                  "a state sync waits for a member's report (or STATE_DONE) as long as the "
                  "group's recent syncs took (their lags' median + max(4 x MAD, median / 2)), "
                  "but never less than N ms nor more than --round-timeout-ms")
      ->group(group);
  cli::add_number(app, "--state-outlier-window", pace.window, 1, 1024,
                  "the state syncs remembered per group (for its deadlines) and per member (for "
                  "its outliers)")
      ->group(group);
  cli::add_number(app, "--state-outliers-to-evict", pace.outliers_to_evict, 1, 1024,
                  "a member that answered after the deadline, or whose report was refused, in N "
                  "of its last --state-outlier-window state syncs is evicted")
      ->group(group);
}

// "Members": how the master treats its members (back-off, journal, state limits).
void add_member_flags(CLI::App& app, Flags& f, Timing& t) {
  const char* group = "Members";
  cli::add_number(app, "--misbehaviour-backoff-ms", t.misbehaviour_backoff_ms, 0, 86'400'000,
                  "a member evicted for misbehaving cannot register again from its address for "
                  "N ms, doubled per offence up to 10 minutes (0: no back-off)")
      ->group(group);
  app.add_option("--journal", f.options.journal_path,
                 "keep a journal in PATH (fsynced, a few dozen bytes): a master restarted on it "
                 "lets the run's peers rejoin and hands out ids and epochs above the earlier "
                 "master's; a corrupt journal is logged and replaced")
      ->type_name("PATH")
      ->group(group);
  cli::add_number(app, "--max-state-tensors", f.options.max_state_tensors, 1, 1u << 20,
                  "a member's shared-state report may name at most N tensors; beyond it the "
                  "member is dropped with the reason")
      ->group(group);
  cli::add_number(app, "--evict-after-missed", f.options.evict_after_missed, 0, 1'000'000,
                  "a member that the group waited for in N engine rounds in a row (the others' "
                  "round deadline passed before it started the round) is evicted (0: never)")
      ->group(group);
  add_state_pace_flags(app, f, t, group);
}

// "Connections before authentication": the limits on those that have not proven the secret.
void add_handshake_flags(CLI::App& app, Flags& f, Timing& t) {
  const char* group = "Connections before authentication";
  cli::add_number(app, "--handshake-timeout-ms", t.handshake_timeout_ms, 1, 600'000,
                  "a connection that has not proven the secret within N ms is dropped")
      ->group(group);
  cli::add_number(app, "--max-unauthenticated", f.options.transport.max_unauthenticated, 1,
                  1'000'000,
                  "connections in their handshake at once; beyond this the oldest is "
                  "dropped to make room")
      ->group(group);
  cli::add_number(app, "--max-unauthenticated-per-address",
                  f.options.transport.max_unauthenticated_per_address, 1, 1'000'000,
                  "connections in their handshake at once from one address; beyond this a "
                  "new one is refused")
      ->group(group);
}

// "Status page": the read-only status endpoint.
void add_status_page_flags(CLI::App& app, Flags& f) {
  const char* group = "Status page";
  app.add_option("--status-listen", f.status_listen,
                 "serve the read-only status page (/), its JSON (/api/status) and Prometheus "
                 "metrics (/metrics) on HOST:PORT; loopback unless you name another address, "
                 "port 0 picks a free port (see the log or --status-port-file), 'off' serves "
                 "nothing")
      ->type_name("HOST:PORT")
      ->group(group);
  app.add_option("--status-port-file", f.status_port_file,
                 "after binding the status endpoint, write its port number to PATH")
      ->type_name("PATH")
      ->group(group);
}

// "Other": the log.
void add_log_flags(CLI::App& app, Flags& f) {
  const char* group = "Other";
  app.add_option("--log-format", f.log_format,
                 "text, or json for one JSON object per line (ts, level, component, pid, msg)")
      ->type_name("FORMAT")
      ->check(cli::one_of({"text", "json"}))
      ->group(group);
  app.add_option("--log-level", f.log_level,
                 "debug, info, warn, error or off; logs go to stderr, one line per "
                 "join, leave (with its reason) and epoch change")
      ->type_name("LEVEL")
      ->check(cli::one_of({"debug", "info", "warn", "error", "off"}))
      ->group(group);
}

// Every flag, group by group in the order --help lists them.
void add_flags(CLI::App& app, Flags& f, Timing& t) {
  add_network_flags(app, f);
  add_security_flags(app, f);
  add_failure_detection_flags(app, t);
  add_member_flags(app, f, t);
  add_handshake_flags(app, f, t);
  add_status_page_flags(app, f);
  add_log_flags(app, f);
}

// The flags into *f; the exit status when the program must stop now (--help, a bad flag).
std::optional<int> parse_flags(int argc, char** argv, Flags* f) {
  CLI::App app{kDescription, "longhaul-master"};
  cli::configure(app, kFooter);
  auto& o = f->options;
  Timing t{static_cast<uint32_t>(o.heartbeat_interval.count()),
           o.heartbeat_misses,
           static_cast<uint32_t>(o.topology_timeout.count()),
           static_cast<uint32_t>(o.transport.handshake_timeout.count()),
           static_cast<uint32_t>(o.topology_grace.count()),
           static_cast<uint32_t>(o.round_timeout.count()),
           static_cast<uint32_t>(o.misbehaviour_backoff.count()),
           static_cast<uint32_t>(o.gather_timeout.count()),
           static_cast<uint32_t>(o.state_pace.floor.count())};
  add_flags(app, *f, t);
  if (auto exit_status = cli::parse(app, argc, argv)) return exit_status;
  o.heartbeat_interval = std::chrono::milliseconds(t.heartbeat_interval_ms);
  o.heartbeat_misses = t.heartbeat_misses;
  o.topology_timeout = std::chrono::milliseconds(t.topology_timeout_ms);
  o.transport.handshake_timeout = std::chrono::milliseconds(t.handshake_timeout_ms);
  o.topology_grace = std::chrono::milliseconds(t.topology_grace_ms);
  o.round_timeout = std::chrono::milliseconds(t.round_timeout_ms);
  o.misbehaviour_backoff = std::chrono::milliseconds(t.misbehaviour_backoff_ms);
  o.gather_timeout = std::chrono::milliseconds(t.gather_timeout_ms);
  o.state_pace.floor = std::chrono::milliseconds(t.state_deadline_floor_ms);
  longhaul::log::Level level;
  longhaul::log::parse_level(f->log_level, &level);  // one_of() admitted only known levels
  longhaul::log::set_level(level);
  longhaul::log::Format format;
  longhaul::log::parse_format(f->log_format, &format);  // one_of() admitted only known formats
  longhaul::log::set_format(format);
  if (f->status_listen != "off")
    if (Status s =
            longhaul::net::parse_host_port(f->status_listen, &f->status.host, &f->status.port);
        !s)
      return cli::usage_error(app, "--status-listen: " + s.message());
  if (Status s = longhaul::net::parse_host_port(f->listen, &o.listen_host, &o.listen_port); !s)
    return cli::usage_error(app, "--listen: " + s.message());
  auto& tls = o.transport.tls;
  if (tls.cert_file.empty() != tls.key_file.empty())
    return cli::usage_error(app, "--tls-cert and --tls-key must be given together");
  tls.enabled = !tls.cert_file.empty();
  if (!f->secret_file.empty()) {
    auto secret = longhaul::read_secret_file(f->secret_file, f->allow_weak_secret);
    if (!secret) return cli::usage_error(app, secret.status().message());
    o.transport.secret = std::move(*secret);
  }
  return std::nullopt;
}

// Serves the status page, its JSON and /metrics (status_endpoints.hpp), logs where, and writes
// --status-port-file.
longhaul::Result<std::unique_ptr<longhaul::ops::HttpServer>> start_status_page(
    const Flags& flags, longhaul::master::Master& master) {
  auto status = longhaul::master::serve_status(master, flags.status);
  if (!status) return status;
  longhaul::log::info("master", "status page at {} (metrics at {}metrics)", (*status)->url(),
                      (*status)->url());
  if (!is_loopback(flags.status.host))
    longhaul::log::warn("master",
                        "the status page on {} is open to the network: it is read-only and holds "
                        "no secret, but shows the run's members and their addresses",
                        flags.status.host);
  if (!flags.status_port_file.empty())
    LH_RETURN_IF_ERROR(write_port_file(flags.status_port_file, (*status)->port()));
  return status;
}

}  // namespace

// One descriptor per peer's control link (and a few per status-page client): the default soft
// limit of 1024 would stop a master at about a thousand peers (docs/scaling.md). Raise it to the
// hard limit, which the operator controls.
void raise_descriptor_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  const rlim_t before = r.rlim_cur;
  r.rlim_cur = r.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &r) != 0)
    longhaul::log::warn("master", "cannot raise the descriptor limit from {}: {}", before,
                        std::strerror(errno));
}

int main(int argc, char** argv) {
  Flags flags;
  if (auto exit_status = parse_flags(argc, argv, &flags)) return *exit_status;
  raise_descriptor_limit();
  // Block the stop signals in every thread (the I/O threads inherit the mask) and wait for them
  // here, so shutdown runs on this thread with no async-signal-safety concerns.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto master = longhaul::master::Master::create(flags.options, flags.io_threads);
  if (!master) {
    std::cerr << "longhaul-master: " << master.status().to_string() << "\n";
    return 1;
  }
  (*master)->run();
  if (!flags.port_file.empty()) {
    if (Status s = write_port_file(flags.port_file, (*master)->port()); !s) {
      std::cerr << "longhaul-master: " << s.to_string() << "\n";
      return 1;
    }
  }
  std::unique_ptr<longhaul::ops::HttpServer> status;
  if (flags.status_listen != "off") {
    auto served = start_status_page(flags, **master);
    if (!served) {
      std::cerr << "longhaul-master: --status-listen: " << served.status().to_string() << "\n";
      return 1;
    }
    status = std::move(*served);
  }
  if (flags.options.transport.secret.empty())
    longhaul::log::warn("master", "no --secret-file: anyone who can reach port {} may join",
                        (*master)->port());
  if (!flags.options.transport.tls.enabled && !is_loopback(flags.options.listen_host))
    longhaul::log::warn("master",
                        "listening on {} without TLS: the control traffic (membership, "
                        "addresses) crosses the network in the clear; use --tls-cert/--tls-key",
                        flags.options.listen_host);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  longhaul::log::info("master", "received {}; shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  status.reset();  // stop serving before the master goes
  (*master)->stop();
  master->reset();
  return 0;
}
