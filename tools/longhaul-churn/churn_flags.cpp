#include "churn_flags.hpp"

#include <algorithm>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "common/parse_number.hpp"
#include "tool_cli.hpp"

namespace longhaul_churn {
namespace {

using longhaul::parse_double;
using longhaul::parse_u64;
namespace cli = longhaul::cli;

constexpr const char* kDescription =
    R"(longhaul-churn: runs a longhaul-master and N longhaul-peer daemons on this machine and
inflicts churn on them for a while, watching that nothing breaks.

Every --kill-interval-ms on average it picks a running peer at random and SIGKILLs it (an abrupt
death), SIGTERMs it (a graceful leave) or SIGSTOPs it for a while and SIGCONTs it (a stall),
with the --mix weights; a replacement peer starts --rejoin-delay-ms later, so new peers join all
the time. With --wanem, that fraction of the peers has its links (and the master link) routed
through longhaul-wanem with latency and jitter.

It watches all the time, and any of these is a VIOLATION:
  - two peers report the same state revision with different state hashes;
  - a running peer (not stopped by us) completes no step for --hang-ms, or a new peer has not
    joined within --join-ms;
  - a peer (or the master) exits when we did not make it (a crash or an error exit);
  - at the end, a survivor does not complete a step within --grace-ms, or does not leave
    cleanly on SIGTERM;
  - the group trains nothing: it applies no round (longhaul-peer: no update, counted in the
    shared state; longhaul-train: no outer round of its method) for longer than
    --max-no-round-ms, by default --hang-ms plus 4 round intervals (the steps between two
    rounds times the group's median step time); or, with --workload train, the mean validation
    loss of theta_g over the last quarter of its evaluations is not at least --min-loss-drop
    below the first quarter's (runs of fewer than 8 evaluations are not judged).
It prints a live status line on stderr (on a terminal, or with --status) and a summary at the
end: steps, kills, joins, operations aborted and retried, recovery time after each kill (from
the SIGKILL to the first step a survivor completes in a later epoch: p50/p99/max), violations.
Exit status: 0 clean, 1 violations (the report names the peers, revisions and steps), 2 bad usage,
3 a setup failure. On exit (normal, error, Ctrl-C) every child it started is killed by pid and
reaped.
)";

constexpr const char* kFooter =
    R"(With --workload train the peers are longhaul-train processes training one GPT together
(a replacement joins with --join and takes the shard of the peer it replaces). Each reports the
hash of theta_g after every step; two peers reporting one step with different hashes is a
VIOLATION. Training lasts --train-steps group steps; the churn stops at --duration or when the
group reaches 90% of them, whichever is first, and the survivors train to the end. Then a
churn-free run of the same peers trains on as many tokens (fewer steps: the churn run's group was
short at times), in the same invocation: the survivors' final validation loss above
--max-loss-ratio times the reference's is a VIOLATION too.

Examples (a one-minute soak, half of the peers behind a 20 ms WAN; four trainers under churn):
  longhaul-churn --peers 8 --duration 60 --wanem 0.5 --latency-ms 20 --json
  longhaul-churn --workload train --peers 4 --duration 60 --train-steps 3000 \
      --train-arg=--data=corpus.txt --json)";

// "60", "90s", "30m" or "2h", in seconds.
bool parse_duration(std::string_view text, double* seconds) {
  double scale = 1;
  if (!text.empty() && (text.back() == 's' || text.back() == 'm' || text.back() == 'h')) {
    scale = text.back() == 's' ? 1 : text.back() == 'm' ? 60 : 3600;
    text.remove_suffix(1);
  }
  if (!parse_double(text, 0, 1e7, seconds)) return false;
  *seconds *= scale;
  return true;
}

// K:T:S or K:T:S:R:B, weights in 0..1000, not all zero.
bool parse_mix(std::string_view text, Flags* f) {
  uint64_t w[5] = {0, 0, 0, 0, 0};
  size_t n = 0;
  for (size_t from = 0; n < 5; ++n) {
    const size_t colon = text.find(':', from);
    if (!parse_u64(text.substr(from, colon == std::string_view::npos ? colon : colon - from), 0,
                   1000, &w[n]))
      return false;
    if (colon == std::string_view::npos) break;
    from = colon + 1;
  }
  if ((n != 2 && n != 4) || w[0] + w[1] + w[2] + w[3] + w[4] == 0) return false;
  f->weight_kill = static_cast<uint32_t>(w[0]);
  f->weight_term = static_cast<uint32_t>(w[1]);
  f->weight_stop = static_cast<uint32_t>(w[2]);
  f->weight_reset = static_cast<uint32_t>(w[3]);
  f->weight_blackhole = static_cast<uint32_t>(w[4]);
  return true;
}

// MIN-MAX milliseconds, 1 <= MIN <= MAX <= one hour.
bool parse_range_ms(std::string_view text, uint32_t* min_ms, uint32_t* max_ms) {
  const size_t dash = text.find('-');
  uint64_t lo = 0, hi = 0;
  if (dash == std::string_view::npos || !parse_u64(text.substr(0, dash), 1, 3'600'000, &lo) ||
      !parse_u64(text.substr(dash + 1), lo, 3'600'000, &hi))
    return false;
  *min_ms = static_cast<uint32_t>(lo);
  *max_ms = static_cast<uint32_t>(hi);
  return true;
}

bool parse_stop_ms(std::string_view text, Flags* f) {
  return parse_range_ms(text, &f->stop_min_ms, &f->stop_max_ms);
}

bool parse_blackhole_ms(std::string_view text, Flags* f) {
  return parse_range_ms(text, &f->blackhole_min_ms, &f->blackhole_max_ms);
}

constexpr uint64_t kDayMs = 86'400'000, kHourMs = 3'600'000;

void add_run_and_churn(CLI::App& app, Flags& f) {
  cli::add_number(app, "--peers", f.peers, 1, 1000, "peers kept running")->group("Run");
  cli::add_number(app, "--nodes", f.nodes, 0, 250,
                  "run N nodes of --rails ranks each instead of --peers single peers; churn "
                  "kills one rank or a whole node, and a node with a dead rank is evicted whole")
      ->group("Run");
  cli::add_number(app, "--rails", f.rails, 1, 64,
                  "ranks per node, one per rail (peer group); with --nodes")
      ->group("Run");
  cli::add_parsed(
      app, "--duration", f.duration_s, parse_duration, "a duration like 60, 90s, 30m or 2h",
      "how long to inflict churn: seconds, or with s/m/h", fmt::format("{}", f.duration_s))
      ->type_name("T")
      ->group("Run");
  cli::add_number(app, "--seed", f.seed, 0, UINT64_MAX,
                  "seeds every random choice: same seed, same schedule")
      ->group("Run");
  cli::add_number(app, "--kill-interval-ms", f.kill_interval_ms, 0, kDayMs,
                  "mean time between disruptive events, 0: no churn")
      ->group("Churn");
  cli::add_parsed(app, "--mix", f, parse_mix,
                  "three or five weights K:T:S[:R:B], not all zero, e.g. 6:2:2 or 5:2:1:1:1",
                  "weights of SIGKILL : SIGTERM : SIGSTOP [: link reset : link black hole] "
                  "events (link faults hit peers routed through longhaul-wanem: need --wanem)",
                  fmt::format("{}:{}:{}", f.weight_kill, f.weight_term, f.weight_stop))
      ->type_name("K:T:S[:R:B]")
      ->group("Churn");
  cli::add_parsed(app, "--stop-ms", f, parse_stop_ms, "MIN-MAX milliseconds, e.g. 200-1500",
                  "how long a SIGSTOPped peer stays stopped",
                  fmt::format("{}-{}", f.stop_min_ms, f.stop_max_ms))
      ->type_name("MIN-MAX")
      ->group("Churn");
  cli::add_parsed(app, "--blackhole-ms", f, parse_blackhole_ms,
                  "MIN-MAX milliseconds, e.g. 200-1500",
                  "how long a black-holed route holds everything before it heals",
                  fmt::format("{}-{}", f.blackhole_min_ms, f.blackhole_max_ms))
      ->type_name("MIN-MAX")
      ->group("Churn");
  cli::add_number(app, "--rejoin-delay-ms", f.rejoin_delay_ms, 0, kHourMs,
                  "a replacement starts this long after a peer went")
      ->group("Churn");
  cli::add_number(app, "--master-restart-ms", f.master_restart_ms, 0, kDayMs,
                  "mean time between master restarts: the master is SIGKILLed and started again "
                  "on the same port with its journal, and every peer must ride through it; 0: "
                  "never")
      ->group("Churn");
  cli::add_number(app, "--min-alive", f.min_alive, 1, 1000,
                  "never disrupt a peer if fewer than N would keep stepping")
      ->group("Churn");
}

// "eu:10,us:40": site names as the lab takes them (a-z, 0-9, _; up to 10; not "master").
bool parse_sites(const std::string& text, std::vector<Flags::Site>* out) {
  out->clear();
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) return false;
    Flags::Site site{item.substr(0, colon), 0};
    const bool good_name = !site.name.empty() && site.name.size() <= 10 && site.name != "master" &&
                           std::all_of(site.name.begin(), site.name.end(), [](char c) {
                             return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                           });
    if (!good_name || !parse_double(item.substr(colon + 1), 0, 60000, &site.one_way_ms))
      return false;
    for (const Flags::Site& other : *out)
      if (other.name == site.name) return false;
    out->push_back(site);
  }
  return !out->empty();
}

void add_watching_and_wan(CLI::App& app, Flags& f) {
  cli::add_number(app, "--hang-ms", f.hang_ms, 100, kDayMs,
                  "no completed step for this long is a hang")
      ->group("Watching");
  cli::add_number(app, "--join-ms", f.join_ms, 100, kDayMs, "a new peer must join within this")
      ->group("Watching");
  cli::add_number(app, "--grace-ms", f.grace_ms, 100, kDayMs,
                  "after the churn, survivors must step within this")
      ->group("Watching");
  cli::add_number(app, "--max-recovery-ms", f.max_recovery_ms, 1, kDayMs,
                  "a recovery p99 above N ms, or a kill never recovered from, is a "
                  "violation too; 0: only reported")
      ->group("Watching");
  cli::add_number(app, "--max-no-round-ms", f.max_no_round_ms, 0, kDayMs,
                  "a group that applies no round for longer than N ms trains nothing: a "
                  "violation; 0: --hang-ms + 4 x the steps between two rounds x the group's "
                  "median step time")
      ->group("Watching");
  cli::add_number(app, "--min-loss-drop", f.min_loss_drop, 0, 1,
                  "with --workload train: theta_g's mean validation loss over the last quarter "
                  "of the evaluations must be at least this fraction below the first quarter's "
                  "(at least 8 evaluations, else not judged); 0: not checked")
      ->type_name("FRACTION")
      ->group("Watching");
  cli::add_number(app, "--wanem", f.wanem_fraction, 0, 1,
                  "route this fraction (0..1) of the peers' links through the emulator, "
                  "the master link of those peers too")
      ->type_name("FRACTION")
      ->group("WAN emulation (longhaul-wanem)");
  cli::add_number(app, "--latency-ms", f.latency_ms, 0, 60000, "one-way latency of the routes, ms")
      ->group("WAN emulation (longhaul-wanem)");
  cli::add_number(app, "--jitter-ms", f.jitter_ms, 0, 60000, "jitter of the routes, ms")
      ->group("WAN emulation (longhaul-wanem)");
  cli::add_number(app, "--rate-mbit", f.rate_mbit, 0, 1e6, "rate cap per route, Mbit/s; 0: none")
      ->group("WAN emulation (longhaul-wanem)");
  cli::add_parsed(app, "--sites", f.sites, parse_sites, "NAME:MS[,NAME:MS...]",
                  "packet lab (root): the master in a site of its own, the peers spread "
                  "round-robin over these sites, each MS one way from the master's (two "
                  "sites: the sum apart); --jitter-ms and --rate-mbit apply to every path. "
                  "E.g. eu:10,us:40,asia:90")
      ->type_name("LIST")
      ->group("WAN emulation (longhaul-wanem)");
}

void add_train_workload(CLI::App& app, Flags& f) {
  const std::string group = "Train workload (--workload train)";
  cli::add_choice(
      app, "--workload", f.workload,
      {{"peer", Workload::kPeer}, {"allgather", Workload::kAllGather}, {"train", Workload::kTrain}},
      "peer: longhaul-peer daemons (a synthetic all-reduce loop); allgather: the "
      "same daemons, each step also all-gathering 16 bytes per peer into the shared "
      "state (--allgather-bytes); train: longhaul-train peers training one GPT "
      "together")
      ->type_name("W")
      ->group("Run");
  app.add_option("--train-arg", f.train_args,
                 "extra argument for every longhaul-train, repeatable, e.g. "
                 "--train-arg=--data=corpus.txt --train-arg=--method=streaming (default: a tiny "
                 "model, --layers 2 --channels 32 --heads 2 --context 32 --batch 4, --method "
                 "diloco --sync-every 20, one thread)")
      ->type_name("ARG")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("")
      ->group(group);
  cli::add_number(app, "--train-steps", f.train_steps, 10, INT64_MAX,
                  "group steps of training (longhaul-train --steps)")
      ->group(group);
  cli::add_number(app, "--max-loss-ratio", f.max_loss_ratio, 1, 1e6,
                  "the survivors' final validation loss over the churn-free run's above this "
                  "is a violation")
      ->group(group);
}

void add_peers_and_output(CLI::App& app, Flags& f) {
  app.add_option("--codec", f.codec, "all-reduce codec of every peer: none, fp16, bf16, u8, u4")
      ->type_name("C")
      ->check(cli::one_of({"none", "fp16", "bf16", "u8", "u4"}))
      ->group("Peers and master");
  app.add_option("--peer-arg", f.peer_args,
                 "extra argument for every longhaul-peer, repeatable, e.g. "
                 "--peer-arg=--tensor-size=1048576 (default workload: tensors of "
                 "65536 and 1025 floats, 2 operations each in flight, 20 ms per step)")
      ->type_name("ARG")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("")
      ->group("Peers and master");
  app.add_flag("--tls", f.tls,
               "every connection uses TLS 1.3 (a certificate made for the run with openssl)")
      ->group("Peers and master");
  app.add_flag("--secret", f.secret,
               "the master and every peer prove a random cluster secret made for the run")
      ->group("Peers and master");
  cli::add_number(app, "--heartbeat-interval-ms", f.heartbeat_interval_ms, 10, kHourMs,
                  "the master's heartbeat interval")
      ->group("Peers and master");
  cli::add_number(app, "--heartbeat-misses", f.heartbeat_misses, 1, 1000,
                  "heartbeats a peer may miss before it is declared dead")
      ->group("Peers and master");
  app.add_option(
         "--bin-dir", f.bin_dir,
         "where longhaul-master, longhaul-peer, longhaul-train and longhaul-wanem are (default: "
         "beside this program, or in the build tree's tools/ directories)")
      ->type_name("DIR")
      ->group("Peers and master");
  app.add_option("--log-dir", f.log_dir,
                 "keep every process's stdout and stderr here (default: a temporary "
                 "directory, removed after a clean run, kept and named on violations)")
      ->type_name("DIR")
      ->group("Output");
  app.add_flag("--keep-logs", f.keep_logs,
               "keep the temporary log directory even after a clean run")
      ->group("Output");
  app.add_flag("--status", f.status, "print the status line even when stderr is not a terminal")
      ->group("Output");
  app.add_flag("--json", f.json, "the last stdout line is one JSON object with the summary")
      ->group("Output");
}

}  // namespace

std::optional<int> parse_flags(int argc, char** argv, Flags* f) {
  CLI::App app{kDescription, "longhaul-churn"};
  cli::configure(app, kFooter);
  add_run_and_churn(app, *f);
  add_watching_and_wan(app, *f);
  add_train_workload(app, *f);
  add_peers_and_output(app, *f);
  if (auto exit_status = cli::parse(app, argc, argv)) return exit_status;
  // longhaul-train prints no LISTEN line before it joins, which routing a peer needs.
  if (f->workload == Workload::kTrain && f->wanem_fraction > 0)
    return cli::usage_error(app, "--wanem is not supported with --workload train");
  if (f->nodes > 0 && f->workload == Workload::kTrain)
    return cli::usage_error(app, "--nodes is not supported with --workload train");
  if (f->nodes > 0) {
    f->peers = f->nodes * f->rails;
    // --min-alive counts nodes: one node is always left to disrupt.
    f->min_alive = std::min(f->min_alive, std::max(f->nodes, 1u) - 1);
  }
  if (f->weight_reset + f->weight_blackhole > 0 && f->wanem_fraction == 0)
    return cli::usage_error(app, "link faults (--mix R:B) need peers routed with --wanem");
  if (f->weight_reset + f->weight_blackhole > 0 && f->workload == Workload::kTrain)
    return cli::usage_error(app, "link faults (--mix R:B) need --workload peer");
  if (f->tls && f->workload == Workload::kTrain)
    return cli::usage_error(app,
                            "--tls is not supported with --workload train (longhaul-train "
                            "has no TLS flags)");
  if (!f->sites.empty() && (f->wanem_fraction > 0 || f->weight_reset + f->weight_blackhole > 0))
    return cli::usage_error(app, "--sites (packet lab) does not mix with --wanem or link faults");
  if (f->min_alive > f->peers) f->min_alive = f->peers;
  return std::nullopt;
}

}  // namespace longhaul_churn
