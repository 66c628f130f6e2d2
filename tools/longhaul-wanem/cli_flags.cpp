#include "cli_flags.hpp"

#include <fmt/format.h>

#include "tool_cli.hpp"

namespace longhaul::wanem {
namespace {

constexpr const char* kDescription =
    R"(longhaul-wanem: puts an emulated WAN between local TCP endpoints.

Each route listens on a local address and forwards every accepted connection to its target,
adding one-way latency and jitter, capping bandwidth per connection and for the route as a whole
(in each direction), and injecting faults: abrupt reset, black hole, heal. Bytes are never
reordered or altered. Single-threaded and event-driven; an idle emulator uses no CPU.
)";

constexpr const char* kFooter =
    R"(Output (stdout, one line each, flushed): "ROUTE NAME PORT" per route once it listens, then
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

Packet lab (any --site; needs root): each site is a network namespace lhw-<pid>-<site> with an
interface wan0 at 10.214.0.<i+1>/24 (i: the site's position), joined through TUN devices to this
process, which delays, drops, reorders and rate-caps the IP packets of each path, so TCP sees the
real round trip. Prints "SITE NAME NETNS ADDRESS" per site, then "READY"; run programs in a site
with `ip netns exec NETNS ...`. Commands: set A-B key=value..., blackhole A-B, heal A-B,
stats A>B, counters, quit (A-B: both directions, A>B: one). See docs/wanlab.md.
  longhaul-wanem --site a --site b --latency-ms 50 --rate-mbit 1000 --path 'a-b,loss=0.0001')";

// A route default, checked by the same rule as a route's own key=value (set_shape_field).
CLI::Option* add_shape_default(CLI::App& app, const std::string& flag, const std::string& key,
                               double& target, const std::string& description) {
  auto check = [key](std::string& text) -> std::string {
    LinkShape scratch;
    Status s = set_shape_field(&scratch, key, text);
    return s ? "" : s.message();
  };
  return app.add_option(flag, target, description)
      ->type_name("X")
      ->check(CLI::Validator(check, ""));
}

// The packet lab's own flags; --latency-ms, --jitter-ms, --rate-mbit and --seed serve both modes.
void add_lab_flags(CLI::App& app, CliFlags& f, std::vector<std::string>& paths) {
  app.add_option("--site", f.lab.sites,
                 "packet lab: a site (network namespace) named NAME (a-z, 0-9, _; up to 10), "
                 "repeatable; at least two make a lab")
      ->type_name("NAME")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--path", paths,
                 "packet lab: A-B,key=value... (both directions) or A>B,... (one); keys "
                 "latency_ms, jitter_ms, loss, reorder, reorder_ms, rate_mbit, queue_ms; "
                 "repeatable, later ones win")
      ->type_name("SPEC")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cli::add_number(app, "--loss", f.lab.defaults.loss, 0.0, 1.0,
                  "packet lab: default probability that a wire packet is lost");
  cli::add_number(app, "--queue-ms", f.lab.defaults.queue_ms, 0.0, 60000.0,
                  "packet lab: default drop-tail queue of a rate-capped path, in ms at its rate");
  cli::add_number(app, "--mtu", f.lab.mtu, 576, 65000, "packet lab: MTU of every site's wan0");
  app.add_flag("!--no-offload", f.lab.offload,
               "packet lab: no TSO/GSO super-packets (one read and write per MTU packet)");
}

void add_flags(CLI::App& app, CliFlags& f, std::vector<std::string>& routes, std::string& schedule,
               uint64_t& target_timeout_ms) {
  app.add_option("--route", routes,
                 "NAME=LISTEN>TARGET[,key=value...], repeatable. Quote it ('>' is special "
                 "to the shell). LISTEN is host:port (port 0 = ephemeral); TARGET is "
                 "host:port, or - when not known yet: connections then wait (up to "
                 "--target-timeout-ms) until the `target` command sets it. "
                 "keys: latency_ms, jitter_ms, rate_mbit, conn_rate_mbit.")
      ->type_name("SPEC")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("");
  LinkShape& d = f.options.defaults;
  add_shape_default(app, "--latency-ms", "latency_ms", d.latency_ms,
                    "default one-way latency of every route, each direction");
  add_shape_default(app, "--jitter-ms", "jitter_ms", d.jitter_ms,
                    "default jitter: each chunk's delay varies uniformly by +-X ms; chunks "
                    "are never reordered, so a late chunk holds back the ones after it");
  add_shape_default(app, "--rate-mbit", "rate_mbit", d.rate_mbit,
                    "default cap of a route's aggregate, each direction, shared fairly by "
                    "its connections; 0 = no cap");
  add_shape_default(app, "--conn-rate-mbit", "conn_rate_mbit", d.conn_rate_mbit,
                    "default cap of each connection, each direction; 0 = no cap");
  cli::add_number(app, "--seed", f.options.seed, 0, UINT64_MAX,
                  "seed of the jitter generator; same seed, same delays");
  cli::add_number(app, "--target-timeout-ms", target_timeout_ms, 0, 86'400'000,
                  "how long a connection waits for a target that is not set; then it "
                  "is reset");
  app.add_option("--schedule", schedule,
                 "faults at times after READY: \"5s:reset:a,8s:blackhole:a,12s:heal:a\". "
                 "Times in ms or s; actions reset, blackhole, heal.")
      ->type_name("LIST");
  app.add_option("--log-level", f.log_level, "debug, info, warn, error or off; logs go to stderr")
      ->type_name("LEVEL")
      ->check(cli::one_of({"debug", "info", "warn", "error", "off"}));
}

// A lab takes the shared defaults and its path settings, once every flag is in.
Status resolve_lab(CliFlags* f, const std::vector<std::string>& routes,
                   const std::vector<std::string>& paths, const std::string& schedule) {
  f->lab_mode = true;
  if (!routes.empty() || !schedule.empty())
    return invalid_argument("--site (packet lab) and --route/--schedule (proxy) do not mix");
  f->lab.defaults.latency_ms = f->options.defaults.latency_ms;
  f->lab.defaults.jitter_ms = f->options.defaults.jitter_ms;
  f->lab.defaults.rate_mbit = f->options.defaults.rate_mbit;
  f->lab.seed = f->options.seed;
  for (const std::string& text : paths) {
    wanlab::PathSetting setting;
    LH_RETURN_IF_ERROR(wanlab::parse_path_setting(text, &setting));
    f->lab.paths.push_back(std::move(setting));
  }
  return wanlab::check_lab_spec(f->lab);
}

// Routes are read once every flag is in, so the global defaults apply to each whatever the order.
Status resolve(CliFlags* f, const std::vector<std::string>& routes, const std::string& schedule) {
  for (const std::string& text : routes) {
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

}  // namespace

std::optional<int> parse_cli_flags(int argc, char** argv, CliFlags* f) {
  CLI::App app{kDescription, "longhaul-wanem"};
  cli::configure(app, kFooter,
                 "longhaul-wanem [options] --route NAME=LISTEN>TARGET[,key=value...] ...");
  std::vector<std::string> routes;
  std::string schedule;
  uint64_t target_timeout_ms = static_cast<uint64_t>(f->options.target_timeout.count());
  std::vector<std::string> paths;
  add_flags(app, *f, routes, schedule, target_timeout_ms);
  add_lab_flags(app, *f, paths);
  if (auto exit_status = cli::parse(app, argc, argv)) return exit_status;
  f->options.target_timeout = std::chrono::milliseconds(target_timeout_ms);
  Status s = f->lab.sites.empty() && paths.empty() ? resolve(f, routes, schedule)
                                                   : resolve_lab(f, routes, paths, schedule);
  if (!s) return cli::usage_error(app, s.message());
  return std::nullopt;
}

}  // namespace longhaul::wanem
