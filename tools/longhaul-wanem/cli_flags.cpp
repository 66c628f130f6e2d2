#include "cli_flags.hpp"

#include <iostream>

#include <fmt/format.h>

#include "common/flag_value.hpp"
#include "common/parse_number.hpp"

namespace longhaul::wanem {

void print_help() {
  std::cout << R"(longhaul-wanem: puts an emulated WAN between local TCP endpoints.

Each route listens on a local address and forwards every accepted connection to its target,
adding one-way latency and jitter, capping bandwidth per connection and for the route as a whole
(in each direction), and injecting faults: abrupt reset, black hole, heal. Bytes are never
reordered or altered. Single-threaded and event-driven; an idle emulator uses no CPU.

Usage: longhaul-wanem [options] --route NAME=LISTEN>TARGET[,key=value...] ...

  --route SPEC          NAME=LISTEN>TARGET[,key=value...], repeatable. Quote it ('>' is special
                        to the shell). LISTEN is host:port (port 0 = ephemeral); TARGET is
                        host:port, or - when not known yet: connections then wait (up to
                        --target-timeout-ms) until the `target` command sets it.
                        keys: latency_ms, jitter_ms, rate_mbit, conn_rate_mbit.
  --latency-ms X        Default one-way latency of every route, each direction (default 0).
  --jitter-ms X         Default jitter: each chunk's delay varies uniformly by +-X ms; chunks
                        are never reordered, so a late chunk holds back the ones after it.
  --rate-mbit X         Default cap of a route's aggregate, each direction, shared fairly by
                        its connections (default 0 = no cap).
  --conn-rate-mbit X    Default cap of each connection, each direction (default 0 = no cap).
  --seed N              Seed of the jitter generator (default 1); same seed, same delays.
  --target-timeout-ms N How long a connection waits for a target that is not set (default
                        10000); then it is reset.
  --schedule LIST       Faults at times after READY: "5s:reset:a,8s:blackhole:a,12s:heal:a".
                        Times in ms or s; actions reset, blackhole, heal.
  --log-level LEVEL     debug, info, warn (default), error or off; logs go to stderr.
  --help                Show this text.

Output (stdout, one line each, flushed): "ROUTE NAME PORT" per route once it listens, then
"READY" after the initial routes.

Commands (stdin, one per line; each answered by one stdout line "OK ..." or "ERR reason"):
  route NAME LISTEN TARGET [key=value...]  add a route            -> OK ROUTE NAME PORT
  target NAME HOST:PORT                    set or replace target  -> OK TARGET NAME HOST:PORT
  reset NAME                 RST both sides of every connection   -> OK RESET NAME COUNT
  blackhole NAME             stop forwarding, close nothing       -> OK BLACKHOLE NAME
  heal NAME                  resume; held bytes are delivered     -> OK HEAL NAME
  set NAME key=value...      change latency_ms, jitter_ms, rate_mbit, conn_rate_mbit
                                                                  -> OK SET NAME <shape>
  stats NAME                 -> OK STATS NAME port=P target=T state=forwarding|blackhole
                                accepted=N open=N up_bytes=N down_bytes=N <shape>
  quit                       close everything and exit 0          -> OK QUIT
End of stdin does not stop the emulator (it can run as a daemon); SIGTERM or SIGINT closes
everything and exits 0.

A black hole holds bytes instead of dropping them (like TCP retransmitting across a dead path):
the endpoints see silence but no close, and after heal the stream carries on intact. Endpoints
must detect it with their own heartbeats or timeouts: the emulator's kernel still ACKs what
fits in its socket buffers, so TCP keepalive alone does not notice.

Example: 40 ms each way and 100 Mbit/s between a client and a server on port 9000:
  longhaul-wanem --route 'srv=127.0.0.1:0>127.0.0.1:9000,latency_ms=40,rate_mbit=100'
)";
}

namespace {

Status parse_u64(std::string_view flag, std::string_view text, uint64_t max, uint64_t* out) {
  if (!longhaul::parse_u64(text, 0, max, out))
    return invalid_argument(
        fmt::format("{} needs a whole number in 0..{}, got '{}'", flag, max, text));
  return Status::ok();
}

}  // namespace

Status parse_cli_flags(int argc, char** argv, CliFlags* f) {
  std::vector<std::string> route_texts;
  std::string schedule;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      f->help = true;
      return Status::ok();
    }
    if (!arg.starts_with("--"))
      return invalid_argument(fmt::format("unexpected argument '{}' (see --help)", arg));
    std::string value;
    if (!take_flag_value(argc, argv, &i, &arg, &value))
      return invalid_argument(fmt::format("{} needs a value (see --help)", arg));
    uint64_t n = 0;
    if (arg == "--route") {
      route_texts.push_back(value);
    } else if (arg == "--latency-ms") {
      LH_RETURN_IF_ERROR(set_shape_field(&f->options.defaults, "latency_ms", value)
                             .with_context(std::string(arg)));
    } else if (arg == "--jitter-ms") {
      LH_RETURN_IF_ERROR(
          set_shape_field(&f->options.defaults, "jitter_ms", value).with_context(std::string(arg)));
    } else if (arg == "--rate-mbit") {
      LH_RETURN_IF_ERROR(
          set_shape_field(&f->options.defaults, "rate_mbit", value).with_context(std::string(arg)));
    } else if (arg == "--conn-rate-mbit") {
      LH_RETURN_IF_ERROR(set_shape_field(&f->options.defaults, "conn_rate_mbit", value)
                             .with_context(std::string(arg)));
    } else if (arg == "--seed") {
      LH_RETURN_IF_ERROR(parse_u64(arg, value, UINT64_MAX, &f->options.seed));
    } else if (arg == "--target-timeout-ms") {
      LH_RETURN_IF_ERROR(parse_u64(arg, value, 86'400'000, &n));
      f->options.target_timeout = std::chrono::milliseconds(n);
    } else if (arg == "--schedule") {
      schedule = value;
    } else if (arg == "--log-level") {
      f->log_level = value;
    } else {
      return invalid_argument(fmt::format("unknown option '{}' (see --help)", arg));
    }
  }
  for (const std::string& text : route_texts) {
    RouteSpec spec;
    LH_RETURN_IF_ERROR(parse_route_spec(text, f->options.defaults, &spec));
    for (const RouteSpec& other : f->routes)
      if (other.name == spec.name)
        return invalid_argument(fmt::format("route {} is given twice", spec.name));
    f->routes.push_back(std::move(spec));
  }
  LH_RETURN_IF_ERROR(parse_schedule(schedule, &f->schedule));
  for (const ScheduledFault& fault : f->schedule) {
    bool known = false;
    for (const RouteSpec& r : f->routes) known |= r.name == fault.route;
    if (!known)
      return invalid_argument(
          fmt::format("--schedule names route '{}', which no --route defines", fault.route));
  }
  return Status::ok();
}

}  // namespace longhaul::wanem
