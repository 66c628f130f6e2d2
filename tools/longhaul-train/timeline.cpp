#include "timeline.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/log.hpp"

namespace longhaul::train::cli {
namespace {

namespace fs = std::filesystem;

std::string steps_path(const std::string& dir) {
  return dir + "/timeline.csv";
}
std::string rounds_path(const std::string& dir) {
  return dir + "/timeline_rounds.csv";
}

bool same_round(std::uint32_t fragment_a, std::uint64_t round_a, std::uint32_t fragment_b,
                std::uint64_t round_b) {
  return fragment_a == fragment_b && round_a == round_b;
}

// Whether the round in flight in `a` is the one `b` reports as in flight.
bool same_in_flight(const lh_sync_stats& a, const lh_sync_stats& b) {
  return a.in_flight && b.in_flight &&
         same_round(a.in_flight_fragment, a.in_flight_round, b.in_flight_fragment,
                    b.in_flight_round);
}

Result<std::ofstream> open_csv(const std::string& path, bool append, const std::string& header) {
  const bool continues = append && fs::exists(path);
  std::ofstream out(path, continues ? std::ios::app : std::ios::trunc);
  if (!out) return io_error("cannot write " + path);
  if (!continues) out << header << '\n';
  return out;
}

}  // namespace

Timeline::Timeline(std::ofstream steps, std::ofstream rounds, std::uint32_t fragments,
                   Clock::time_point origin)
    : steps_(std::move(steps)),
      rounds_(std::move(rounds)),
      fragments_(fragments),
      origin_ns_(
          std::chrono::duration_cast<std::chrono::nanoseconds>(origin.time_since_epoch()).count()),
      codes_(fragments),
      launch_step_(fragments, -1) {}

Result<Timeline> Timeline::open(const std::string& out_dir, bool append,
                                std::optional<std::uint32_t> fragments, Clock::time_point origin) {
  std::string header = "step,start_s,compute_s,blocked_s,tau,tau_needed";
  for (std::uint32_t f = 0; f < fragments.value_or(0); ++f) header += fmt::format(",f{}", f);
  Result<std::ofstream> steps = open_csv(steps_path(out_dir), append, header);
  if (!steps) return steps.status();
  std::ofstream rounds;
  if (fragments) {
    Result<std::ofstream> r =
        open_csv(rounds_path(out_dir), append,
                 "fragment,round,launch_step,settle_step,launched_s,ready_s,applied");
    if (!r) return r.status();
    rounds = std::move(*r);
  }
  return Timeline(std::move(*steps), std::move(rounds), fragments.value_or(0), origin);
}

void Timeline::record(const StepTiming& t, const std::optional<lh_sync_stats>& engine) {
  // The sync calls run inside the step's call: blocked <= wall, which the tests check.
  steps_ << t.step << ','
         << fmt::format("{:.6f},{:.6f},{:.6f}", t.start_s, t.wall_s - t.blocked_s, t.blocked_s);
  if (!engine || fragments_ == 0) {
    steps_ << ",,\n";  // no τ without an engine
    return;
  }
  for (std::string& c : codes_) c.clear();
  if (previous_) {
    settle(t.step, *engine);
    launch(t.step, *engine);
  }
  if (engine->in_flight && engine->in_flight_fragment < fragments_)
    codes_[engine->in_flight_fragment] += engine->in_flight_ready ? 'r' : 'n';
  steps_ << ',' << engine->delay << ',' << engine->delay_needed;
  for (const std::string& c : codes_) steps_ << ',' << c;
  steps_ << '\n';
  previous_ = engine;
}

// The engine keeps one round in flight at a time, so the rounds a step settles are the one in
// flight before it (if it settled) and the last settled one (launched in this very step when
// it is not the one that was in flight: a blocking round).
void Timeline::settle(std::int64_t step, const lh_sync_stats& now) {
  const lh_sync_stats& before = *previous_;
  const std::uint64_t applied = now.rounds_applied - before.rounds_applied;
  const std::uint64_t settled = applied + (now.rounds_dropped - before.rounds_dropped);
  if (settled == 0) return;
  const bool last_was_in_flight =
      before.in_flight && same_round(before.in_flight_fragment, before.in_flight_round,
                                     now.last_fragment, now.last_round);
  if (settled > 1 && before.in_flight && !last_was_in_flight && !same_in_flight(before, now)) {
    // The round in flight before settled first; its outcome is what the last one's leaves.
    const bool earlier_applied = applied > static_cast<std::uint64_t>(now.last_applied);
    settle_round(step, before.in_flight_fragment, before.in_flight_round, earlier_applied,
                 before.in_flight_launched_ns,
                 before.in_flight_ready ? before.in_flight_ready_ns : 0, false);
  }
  settle_round(step, now.last_fragment, now.last_round, now.last_applied != 0, now.last_launched_ns,
               now.last_ready_ns, !last_was_in_flight);
}

void Timeline::settle_round(std::int64_t step, std::uint32_t fragment, std::uint64_t round,
                            bool applied, std::uint64_t launched_ns, std::uint64_t ready_ns,
                            bool launched_here) {
  if (fragment >= fragments_) return;
  if (launched_here) {
    codes_[fragment] += 'L';
    launch_step_[fragment] = step;
  }
  codes_[fragment] += applied ? 'A' : 'D';
  const std::int64_t launched = launch_step_[fragment];
  rounds_ << fragment << ',' << round << ',' << (launched >= 0 ? std::to_string(launched) : "")
          << ',' << step << ',' << seconds_since_origin(launched_ns) << ','
          << seconds_since_origin(ready_ns) << ',' << (applied ? 1 : 0) << '\n';
  launch_step_[fragment] = -1;
}

// A round in flight now that was not before was launched in this step.
void Timeline::launch(std::int64_t step, const lh_sync_stats& now) {
  if (!now.in_flight || now.in_flight_fragment >= fragments_ || same_in_flight(*previous_, now))
    return;
  codes_[now.in_flight_fragment] += 'L';
  launch_step_[now.in_flight_fragment] = step;
}

void Timeline::finish(std::int64_t step, const std::optional<lh_sync_stats>& engine) {
  if (!engine || !previous_ || fragments_ == 0) return;
  for (std::string& c : codes_) c.clear();
  settle(step, *engine);
  previous_ = engine;
}

void Timeline::flush() {
  steps_.flush();
  if (rounds_.is_open()) rounds_.flush();
}

// "" for a time the engine did not measure (0), else seconds since the origin.
std::string Timeline::seconds_since_origin(std::uint64_t steady_ns) const {
  if (steady_ns == 0) return "";
  return fmt::format("{:.6f}",
                     static_cast<double>(static_cast<std::int64_t>(steady_ns) - origin_ns_) / 1e9);
}

void plot_timeline(const std::string& script, const std::string& out_dir) {
  const std::string png = out_dir + "/timeline.png";
  const std::string rounds = rounds_path(out_dir);
  const std::string cmd =
      fmt::format("python3 '{}' '{}' '{}'{}", script, steps_path(out_dir), png,
                  fs::exists(rounds) ? fmt::format(" --rounds '{}'", rounds) : std::string());
  if (std::system(cmd.c_str()) == 0) {
    std::fprintf(stderr, "wrote %s\n", png.c_str());
  } else {
    log::warn("train", "plotting the timeline failed ({}); its CSV is complete", cmd);
  }
}

}  // namespace longhaul::train::cli
