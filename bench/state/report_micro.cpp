// What one shared-state report costs the master, on one core (issue 24, item 7): decoding a
// STATE_REPORT of N tensors of one float each (the most a member may name is --max-state-tensors,
// 65536 by default), checking it, electing a group's content from P such reports, and freeing
// them, as the master's strand does once per sync. Encoding (the member's side) for reference.
// Prints one JSON line of the best of R runs, in ms.
//
//   longhaul_state_report_micro [--tensors N] [--peers P] [--repeats R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "state/block_hash.hpp"
#include "state/election.hpp"
#include "tool_cli.hpp"
#include "wire/control_messages.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace st = longhaul::state;
namespace wire = longhaul::wire;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Tensors "t0000000".. of one f32 each; peer p's block hashes differ from peer 1's in every
// p-th tensor, so the election has votes to count.
wire::StateReportMsg report_of(size_t tensors, uint64_t peer) {
  wire::StateReportMsg r;
  r.epoch = 1;
  r.block_bytes = st::kBlockBytes;
  r.tensors.reserve(tensors);
  for (size_t i = 0; i < tensors; ++i) {
    wire::TensorReport t;
    char name[32];
    std::snprintf(name, sizeof name, "t%07zu", i);
    t.name = name;
    t.count = 1;
    t.block_hashes = {i * 0x9E3779B97F4A7C15ull + (peer > 1 && i % peer == 0 ? peer : 0)};
    t.compressible = {0};
    r.tensors.push_back(std::move(t));
  }
  return r;
}

struct Costs {
  double encode = 1e300, decode = 1e300, validate = 1e300, elect = 1e300, free = 1e300;
  size_t bytes = 0;
};

void run_once(size_t tensors, uint64_t peers, Costs& best) {
  std::vector<std::vector<std::byte>> encoded;
  auto t0 = Clock::now();
  for (uint64_t p = 1; p <= peers; ++p)
    encoded.push_back(wire::encode_control(report_of(tensors, p)));
  best.encode = std::min(best.encode, ms_since(t0) / static_cast<double>(peers));
  best.bytes = encoded.front().size();
  std::map<st::PeerId, st::Participant> participants;
  t0 = Clock::now();
  for (uint64_t p = 1; p <= peers; ++p)
    participants[p].report = std::get<wire::StateReportMsg>(*wire::decode_control(encoded[p - 1]));
  best.decode = std::min(best.decode, ms_since(t0) / static_cast<double>(peers));
  t0 = Clock::now();
  for (const auto& [id, p] : participants)
    if (!st::validate_report(p.report)) std::abort();
  best.validate = std::min(best.validate, ms_since(t0) / static_cast<double>(peers));
  t0 = Clock::now();
  const st::Election e = st::elect(participants, std::nullopt, 1);
  best.elect = std::min(best.elect, ms_since(t0));
  if (e.plans.size() != peers) std::abort();
  t0 = Clock::now();
  participants.clear();
  best.free = std::min(best.free, ms_since(t0) / static_cast<double>(peers));
}

}  // namespace

int main(int argc, char** argv) {
  size_t tensors = 65536;
  uint64_t peers = 1;
  int repeats = 10;
  CLI::App app{"What one shared-state report of many tensors costs the master, on one core.\n",
               "longhaul_state_report_micro"};
  longhaul::cli::configure(app, "");
  longhaul::cli::add_number(app, "--tensors", tensors, 1, wire::kMaxTensors, "tensors per report");
  longhaul::cli::add_number(app, "--peers", peers, 1, 256, "reports in the election");
  longhaul::cli::add_number(app, "--repeats", repeats, 1, 1000, "runs (best taken)");
  if (auto exit_status = longhaul::cli::parse(app, argc, argv)) return *exit_status;
  Costs best;
  for (int r = 0; r < repeats; ++r) run_once(tensors, peers, best);
  nlohmann::json j = {{"tensors", tensors},
                      {"peers", peers},
                      {"report_bytes", best.bytes},
                      {"encode_ms_per_report", best.encode},
                      {"decode_ms_per_report", best.decode},
                      {"validate_ms_per_report", best.validate},
                      {"elect_ms", best.elect},
                      {"free_ms_per_report", best.free}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
