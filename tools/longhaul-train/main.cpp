// longhaul-train: trains the embedded byte-level GPT, alone or as one peer of a group (with
// --master); see docs/trainer.md.
#include <unistd.h>

#include <cstdlib>

#include "cli_options.hpp"
#include "local_run.hpp"
#include "peer_run.hpp"

namespace {

// Waiting threads must sleep, not spin (design principle 4): a spinning OpenMP barrier burns the
// CPU that other work on the machine (the peer's network and hashing threads, other processes)
// needs, and on a busy machine it stalls every kernel behind a descheduled thread; measured
// here, 2 threads on a loaded 2-core machine ran 2.6-5.0k tokens/s spinning, 9.3-9.5k passive.
// libgomp reads OMP_WAIT_POLICY once, before main(), so the trainer re-executes itself with the
// policy set, unless the user chose one.
void ensure_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc?): carry on with the default policy.
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = longhaul::train::cli;
  ensure_passive_omp_wait(argv);
  cli::Options options;
  if (auto exit_status = cli::parse(argc, argv, &options)) return *exit_status;
  return options.peer.master.empty() ? cli::run_local(options) : cli::run_peer(options);
}
