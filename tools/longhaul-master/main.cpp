// longhaul-master: the coordination daemon of a longhaul training run.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "common/flag_value.hpp"
#include "common/log.hpp"
#include "common/parse_number.hpp"
#include "common/secret_file.hpp"
#include "master/master.hpp"

namespace {

using longhaul::Status;

constexpr const char* kDefaultListen = "0.0.0.0:48484";

void print_help() {
  std::cout << R"(longhaul-master: coordinates the peers of a longhaul training run.

Peers (training processes using the longhaul library) connect to the master, which tells
them who is in the run, in which ring order they reduce, and when the membership changes. The
master carries no training data; one small process is enough for the whole run. Peers may join and
leave (or die) at any time; the master notices, tells the survivors, and re-forms the ring.

Usage: longhaul-master [options]

Network:
  --listen HOST:PORT        Address to accept peers on (default )"
            << kDefaultListen << R"().
                            Port 0 picks a free port; IPv6 as [addr]:port.
  --port-file PATH          After binding, write the port number to PATH (for scripts and tests).
  --io-threads N            Network threads (default 2).

Security (use both on any network you do not fully trust):
  --secret-file PATH        File holding the cluster secret. Every peer must prove it knows the
                            same secret (HMAC challenge-response) or it is refused. Without this
                            option anyone who can reach the port may join.
  --tls-cert PATH           PEM certificate; with --tls-key, every connection uses TLS 1.3 and
  --tls-key PATH            peers must enable TLS too.

Failure detection:
  --heartbeat-interval-ms N Heartbeats are exchanged every N ms in both directions (default 1000).
  --heartbeat-misses N      A peer silent for N intervals is declared dead (default 3). A closed
                            socket is detected at once, without waiting for heartbeats.
  --topology-timeout-ms N   Peers that have not set up their links N ms after a membership change
                            are evicted (default 30000).

Other:
  --log-level LEVEL         debug, info (default), warn, error or off. Logs go to stderr: one line
                            per join, leave (with its reason) and epoch change.
  --help                    Show this text.

Stop the master with Ctrl-C or SIGTERM; connected peers see it go and fail with LH_ERR_PEER_LOST.

Example:
  echo "a long random string" > secret && chmod 600 secret
  longhaul-master --listen 0.0.0.0:48484 --secret-file secret
)";
}

Status parse_uint(std::string_view flag, std::string_view text, uint64_t max, uint64_t* out) {
  if (!longhaul::parse_u64(text, 1, max, out))
    return longhaul::invalid_argument(
        fmt::format("{} needs a whole number in 1..{}, got '{}'", flag, max, text));
  return Status::ok();
}

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

struct Flags {
  longhaul::master::MasterOptions options;
  std::string port_file;
  unsigned io_threads = 2;
  bool help = false;
};

Status parse_flags(int argc, char** argv, Flags* f) {
  std::string listen = kDefaultListen, secret_file, level = "info";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      f->help = true;
      return Status::ok();
    }
    std::string value;
    if (!longhaul::take_flag_value(argc, argv, &i, &arg, &value))
      return longhaul::invalid_argument(fmt::format("{} needs a value (see --help)", arg));
    uint64_t n = 0;
    if (arg == "--listen")
      listen = value;
    else if (arg == "--port-file")
      f->port_file = value;
    else if (arg == "--secret-file")
      secret_file = value;
    else if (arg == "--tls-cert")
      f->options.transport.tls.cert_file = value;
    else if (arg == "--tls-key")
      f->options.transport.tls.key_file = value;
    else if (arg == "--log-level")
      level = value;
    else if (arg == "--heartbeat-interval-ms") {
      LH_RETURN_IF_ERROR(parse_uint(arg, value, 3'600'000, &n));
      f->options.heartbeat_interval = std::chrono::milliseconds(n);
    } else if (arg == "--heartbeat-misses") {
      LH_RETURN_IF_ERROR(parse_uint(arg, value, 1000, &n));
      f->options.heartbeat_misses = static_cast<uint32_t>(n);
    } else if (arg == "--topology-timeout-ms") {
      LH_RETURN_IF_ERROR(parse_uint(arg, value, 86'400'000, &n));
      f->options.topology_timeout = std::chrono::milliseconds(n);
    } else if (arg == "--io-threads") {
      LH_RETURN_IF_ERROR(parse_uint(arg, value, 256, &n));
      f->io_threads = static_cast<unsigned>(n);
    } else {
      return longhaul::invalid_argument(fmt::format("unknown option '{}' (see --help)", arg));
    }
  }
  longhaul::log::Level l;
  if (!longhaul::log::parse_level(level, &l))
    return longhaul::invalid_argument(
        fmt::format("--log-level must be debug, info, warn, error or off, got '{}'", level));
  longhaul::log::set_level(l);
  LH_RETURN_IF_ERROR(
      longhaul::net::parse_host_port(listen, &f->options.listen_host, &f->options.listen_port)
          .with_context("--listen"));
  auto& tls = f->options.transport.tls;
  if (tls.cert_file.empty() != tls.key_file.empty())
    return longhaul::invalid_argument("--tls-cert and --tls-key must be given together");
  tls.enabled = !tls.cert_file.empty();
  if (!secret_file.empty()) {
    auto secret = longhaul::read_secret_file(secret_file);
    if (!secret) return secret.status();
    f->options.transport.secret = std::move(*secret);
  }
  return Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (Status s = parse_flags(argc, argv, &flags); !s) {
    std::cerr << "longhaul-master: " << s.to_string() << "\n";
    return 2;
  }
  if (flags.help) {
    print_help();
    return 0;
  }
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
  if (flags.options.transport.secret.empty())
    longhaul::log::warn("master", "no --secret-file: anyone who can reach port {} may join",
                        (*master)->port());
  int sig = 0;
  sigwait(&stop_signals, &sig);
  longhaul::log::info("master", "received {}; shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*master)->stop();
  master->reset();
  return 0;
}
