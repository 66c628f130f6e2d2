#include "peer_command.hpp"

#include <algorithm>
#include <utility>

namespace longhaul_churn {
namespace {

using Defaults = std::vector<std::pair<const char*, const char*>>;

// longhaul-peer: two tensors, two operations each in flight, 20 ms of "compute" per step.
const Defaults kPeerDefaults = {
    {"--tensor-size", "65536,1025"}, {"--inflight", "2"}, {"--step-delay-ms", "20"}};

// --workload allgather: each step also all-gathers 16 bytes per peer.
const Defaults kAllGatherDefaults = {{"--allgather-bytes", "16"}};

// longhaul-train: a model small enough for a few milliseconds a step on one thread, so many
// peers share two cores and a run sees thousands of steps.
const Defaults kTrainDefaults = {
    {"--layers", "2"},   {"--channels", "32"}, {"--heads", "2"},
    {"--context", "32"}, {"--batch", "4"},     {"--threads", "1"},
    {"--warmup", "10"},  {"--lr", "5e-3"},     {"--val-batches", "16"}};
// DiLoCo with a round every 20 steps, unless the user picks a method (and then its settings: the
// engine's flags are refused with --method dp).
const Defaults kTrainMethodDefaults = {{"--method", "diloco"}, {"--sync-every", "20"}};

bool gives(const std::vector<std::string>& user, const std::string& flag) {
  return std::any_of(user.begin(), user.end(), [&](const std::string& a) {
    return a == flag || a.rfind(flag + "=", 0) == 0;
  });
}

// Appends each default whose flag the user's arguments do not give.
void add_defaults(const Defaults& defaults, const std::vector<std::string>& user,
                  std::vector<std::string>& argv) {
  for (const auto& [flag, value] : defaults) {
    if (!gives(user, flag)) {
      argv.push_back(flag);
      argv.push_back(value);
    }
  }
}

}  // namespace

std::vector<std::string> peer_command(const Flags& flags, const PeerLaunch& launch,
                                      const PeerPlace& place) {
  std::vector<std::string> argv;
  if (!place.netns.empty()) argv = {"ip", "netns", "exec", place.netns};
  for (const std::string& a :
       {launch.binary, std::string("--master"),
        place.master_host + ":" + std::to_string(launch.master_port), std::string("--listen"),
        place.listen_host + ":0", std::string("--codec"), flags.codec})
    argv.push_back(a);
  argv.insert(argv.end(), launch.security.begin(), launch.security.end());
  if (launch.advertise_port > 0) {
    argv.push_back("--advertise");
    argv.push_back("127.0.0.1:" + std::to_string(launch.advertise_port));
  }
  if (flags.workload != Workload::kTrain) {
    if (!launch.node.empty())
      for (const std::string& a :
           {std::string("--node"), launch.node, std::string("--rail"), std::to_string(launch.rail),
            std::string("--rails"), std::to_string(flags.rails)})
        argv.push_back(a);
    if (flags.workload == Workload::kAllGather)
      add_defaults(kAllGatherDefaults, flags.peer_args, argv);
    add_defaults(kPeerDefaults, flags.peer_args, argv);
    argv.insert(argv.end(), flags.peer_args.begin(), flags.peer_args.end());
    return argv;
  }
  // Every step's theta_g hash and the --json summary on stdout; the loss plot is not needed.
  for (const std::string& a :
       {std::string("--peers"), std::to_string(flags.peers), std::string("--peer-index"),
        std::to_string(launch.shard), std::string("--steps"), std::to_string(flags.train_steps),
        std::string("--out"), launch.out_dir, std::string("--theta-every"), std::string("1"),
        std::string("--json"), std::string("--no-plot")})
    argv.push_back(a);
  if (launch.join) argv.push_back("--join");
  add_defaults(kTrainDefaults, flags.train_args, argv);
  if (!gives(flags.train_args, "--method")) add_defaults(kTrainMethodDefaults, {}, argv);
  argv.insert(argv.end(), flags.train_args.begin(), flags.train_args.end());
  return argv;
}

}  // namespace longhaul_churn
