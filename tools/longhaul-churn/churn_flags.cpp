#include "churn_flags.hpp"

#include <cstdlib>
#include <string_view>

#include "common/flag_value.hpp"
#include "common/parse_number.hpp"

namespace longhaul_churn {

using longhaul::parse_double;
using longhaul::parse_u64;

std::string usage() {
  return R"(longhaul-churn: runs a longhaul-master and N longhaul-peer daemons on this machine and
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
    cleanly on SIGTERM.
It prints a live status line on stderr (on a terminal, or with --status) and a summary at the
end: steps, kills, joins, operations aborted and retried, recovery time after each kill (from
the SIGKILL to the first step a survivor completes in a later epoch: p50/p99/max), violations.
Exit status: 0 clean, 1 violations (the report names the peers, revisions and steps), 2 bad usage,
3 a setup failure. On exit (normal, error, Ctrl-C) every child it started is killed by pid and
reaped.

Usage: longhaul-churn [options]

Run:
  --peers N              peers kept running (default 8)
  --duration T           how long to inflict churn: seconds, or with s/m/h (default 60)
  --seed N               seeds every random choice (default 1): same seed, same schedule
Churn:
  --kill-interval-ms N   mean time between disruptive events (default 2000; 0: no churn)
  --mix K:T:S            weights of SIGKILL : SIGTERM : SIGSTOP events (default 6:2:2)
  --stop-ms MIN-MAX      how long a SIGSTOPped peer stays stopped (default 200-1500)
  --rejoin-delay-ms N    a replacement starts this long after a peer went (default 300)
  --min-alive N          never disrupt a peer if fewer than N would keep stepping (default 3)
Watching:
  --hang-ms N            no completed step for this long is a hang (default 15000)
  --join-ms N            a new peer must join within this (default 30000)
  --grace-ms N           after the churn, survivors must step within this (default 5000)
  --max-recovery-ms N    a recovery p99 above N ms, or a kill never recovered from, is a
                         violation too (default 0: only reported)
WAN emulation (longhaul-wanem):
  --wanem FRACTION       route this fraction (0..1) of the peers' links through the emulator
                         (default 0: none); the master link of those peers too
  --latency-ms X         one-way latency of the routes (default 10)
  --jitter-ms X          jitter of the routes (default 2)
  --rate-mbit X          rate cap per route (default 0: none)
Peers and master:
  --codec C              all-reduce codec of every peer: none, fp16, bf16, u8, u4 (default u8)
  --peer-arg ARG         extra argument for every longhaul-peer, repeatable, e.g.
                         --peer-arg=--tensor-size=1048576 (default workload: tensors of
                         65536 and 1025 floats, 2 operations each in flight, 20 ms per step)
  --heartbeat-interval-ms N, --heartbeat-misses N   the master's failure detection (1000, 3)
  --bin-dir DIR          where longhaul-master, longhaul-peer and longhaul-wanem are (default:
                         beside this program, or in the build tree's tools/ directories)
Output:
  --log-dir DIR          keep every process's stdout and stderr here (default: a temporary
                         directory, removed after a clean run, kept and named on violations)
  --keep-logs            keep the temporary log directory even after a clean run
  --status               print the status line even when stderr is not a terminal
  --json                 the last stdout line is one JSON object with the summary
  --help                 show this text

Example (a one-minute soak, half of the peers behind a 20 ms WAN):
  longhaul-churn --peers 8 --duration 60 --wanem 0.5 --latency-ms 20 --json
)";
}

namespace {}  // namespace

bool parse_flags(int argc, char** argv, Flags* f, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      f->help = true;
      return true;
    }
    if (arg == "--json" || arg == "--status" || arg == "--keep-logs") {
      (arg == "--json" ? f->json : arg == "--status" ? f->status : f->keep_logs) = true;
      continue;
    }
    std::string value;
    if (!longhaul::take_flag_value(argc, argv, &i, &arg, &value)) {
      *error = std::string(arg) + " needs a value (see --help)";
      return false;
    }
    const auto bad = [&](const std::string& what) {
      *error = std::string(arg) + " needs " + what + ", got '" + value + "'";
      return false;
    };
    uint64_t n = 0;
    const auto u32 = [&](uint64_t min, uint64_t max, uint32_t* out) {
      if (!parse_u64(value, min, max, &n))
        return bad("a whole number in " + std::to_string(min) + ".." + std::to_string(max));
      *out = static_cast<uint32_t>(n);
      return true;
    };
    if (arg == "--peers") {
      if (!u32(1, 1000, &f->peers)) return false;
    } else if (arg == "--duration") {
      double scale = 1;
      std::string number = value;
      if (!number.empty() &&
          (number.back() == 's' || number.back() == 'm' || number.back() == 'h')) {
        scale = number.back() == 's' ? 1 : number.back() == 'm' ? 60 : 3600;
        number.pop_back();
      }
      if (!parse_double(number, 0, 1e7, &f->duration_s))
        return bad("a duration like 60, 90s, 30m or 2h");
      f->duration_s *= scale;
    } else if (arg == "--seed") {
      if (!parse_u64(value, 0, UINT64_MAX, &f->seed)) return bad("a whole number");
    } else if (arg == "--kill-interval-ms") {
      if (!u32(0, 86'400'000, &f->kill_interval_ms)) return false;
    } else if (arg == "--mix") {
      const size_t a = value.find(':'), b = value.find(':', a == std::string::npos ? a : a + 1);
      uint64_t k = 0, t = 0, s = 0;
      if (a == std::string::npos || b == std::string::npos ||
          !parse_u64(std::string_view(value).substr(0, a), 0, 1000, &k) ||
          !parse_u64(std::string_view(value).substr(a + 1, b - a - 1), 0, 1000, &t) ||
          !parse_u64(std::string_view(value).substr(b + 1), 0, 1000, &s) || k + t + s == 0)
        return bad("three weights K:T:S, not all zero, e.g. 6:2:2");
      f->weight_kill = static_cast<uint32_t>(k);
      f->weight_term = static_cast<uint32_t>(t);
      f->weight_stop = static_cast<uint32_t>(s);
    } else if (arg == "--stop-ms") {
      const size_t dash = value.find('-');
      uint64_t lo = 0, hi = 0;
      if (dash == std::string::npos ||
          !parse_u64(std::string_view(value).substr(0, dash), 1, 3'600'000, &lo) ||
          !parse_u64(std::string_view(value).substr(dash + 1), lo, 3'600'000, &hi))
        return bad("MIN-MAX milliseconds, e.g. 200-1500");
      f->stop_min_ms = static_cast<uint32_t>(lo);
      f->stop_max_ms = static_cast<uint32_t>(hi);
    } else if (arg == "--rejoin-delay-ms") {
      if (!u32(0, 3'600'000, &f->rejoin_delay_ms)) return false;
    } else if (arg == "--min-alive") {
      if (!u32(1, 1000, &f->min_alive)) return false;
    } else if (arg == "--hang-ms") {
      if (!u32(100, 86'400'000, &f->hang_ms)) return false;
    } else if (arg == "--join-ms") {
      if (!u32(100, 86'400'000, &f->join_ms)) return false;
    } else if (arg == "--grace-ms") {
      if (!u32(100, 86'400'000, &f->grace_ms)) return false;
    } else if (arg == "--max-recovery-ms") {
      if (!u32(1, 86'400'000, &f->max_recovery_ms)) return false;
    } else if (arg == "--wanem") {
      if (!parse_double(value, 0, 1, &f->wanem_fraction)) return bad("a fraction in 0..1");
    } else if (arg == "--latency-ms") {
      if (!parse_double(value, 0, 60000, &f->latency_ms)) return bad("milliseconds");
    } else if (arg == "--jitter-ms") {
      if (!parse_double(value, 0, 60000, &f->jitter_ms)) return bad("milliseconds");
    } else if (arg == "--rate-mbit") {
      if (!parse_double(value, 0, 1e6, &f->rate_mbit)) return bad("Mbit/s");
    } else if (arg == "--codec") {
      if (value != "none" && value != "fp16" && value != "bf16" && value != "u8" && value != "u4")
        return bad("none, fp16, bf16, u8 or u4");
      f->codec = value;
    } else if (arg == "--peer-arg") {
      f->peer_args.push_back(value);
    } else if (arg == "--heartbeat-interval-ms") {
      if (!u32(10, 3'600'000, &f->heartbeat_interval_ms)) return false;
    } else if (arg == "--heartbeat-misses") {
      if (!u32(1, 1000, &f->heartbeat_misses)) return false;
    } else if (arg == "--bin-dir") {
      f->bin_dir = value;
    } else if (arg == "--log-dir") {
      f->log_dir = value;
    } else {
      *error = "unknown option '" + std::string(arg) + "' (see --help)";
      return false;
    }
  }
  if (f->min_alive > f->peers) f->min_alive = f->peers;
  return true;
}

}  // namespace longhaul_churn
