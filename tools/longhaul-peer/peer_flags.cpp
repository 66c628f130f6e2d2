#include "peer_flags.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/secret_file.hpp"
#include "tool_cli.hpp"

namespace longhaul_peer {
namespace {

namespace cli = longhaul::cli;

constexpr const char* kDescription =
    R"(longhaul-peer: a peer daemon that joins a longhaul run and trains a synthetic workload.

It connects to a longhaul-master, is admitted into the run, and loops until stopped (SIGTERM or
Ctrl-C: it finishes the step it is in and leaves gracefully; a second signal exits at once).
Each step is shaped like a DiLoCo outer step:

  1. if the master says the membership changes (peers pending), update_topology;
  2. all-reduce (average) a deterministic pseudo-update, one per state tensor, each split into
     --inflight operations that are all in flight at once, quantized with --codec;
  3. add the averaged update to the state tensors;
  4. synchronize the shared state with the group (enforce-popular; a newcomer's first sync is
     receive-only), which advances the revision by one and repairs any drift.

A failed collective (a peer was lost, the master aborted the epoch) is retried after
update_topology; any other library error ends the daemon with exit status 1 and the message.
Every peer that completed the same revision holds bit-identical state: compare the hashes.
)";

constexpr const char* kFooter =
    R"(Output (stdout, one line per event, key=value, flushed at once):
  LISTEN port=P                         the data listener's port (before joining)
  JOINED id=I epoch=E world=W
  STEP step=S rev=R hash=H world=W epoch=E id=I ar_ms=.. sync_ms=.. rx=.. tx=.. fetched=.. aborts=A
       applied=N                        after each completed step S of the group (S = R - 1):
                                        the state's revision R and hash
                                        (peers at the same R hold the same H), the all-reduce and
                                        sync times, the sync's bytes and blocks fetched, the aborts
                                        the master pushed so far, the updates the group applied
                                        (a counter in the shared state)
  RETRY step=S phase=allreduce|sync status=LH_ERR_.. message=".."
  TOPOLOGY epoch=E world=W              after an update_topology that changed the epoch
  EVICTED message=".."                  another rank of this node died or left: the master
                                        evicted the whole node (then ERROR ... status=
                                        LH_ERR_NODE_EVICTED and exit status 4)
  LEFT reason=".."                      after a graceful leave (exit status 0)
  ERROR what=.. status=LH_ERR_.. message=".."   (then exit status 1; 4 for LH_ERR_NODE_EVICTED)

Example:
  longhaul-master --listen 127.0.0.1:48484 &
  longhaul-peer --master 127.0.0.1:48484 --codec u8 &
  longhaul-peer --master 127.0.0.1:48484 --codec u8)";

void add_run_and_network(CLI::App& app, Flags& f) {
  app.add_option("--master", f.master, "the longhaul-master to join")
      ->type_name("HOST:PORT")
      ->required()
      ->group("Run");
  cli::add_number(app, "--group", f.group, 0, UINT32_MAX,
                  "peer group; peers reduce with their own group only (default: the rail)")
      ->group("Run");
  app.add_option("--node", f.node,
                 "the node (machine) this rank belongs to; all its rails join, move and leave "
                 "together (default: GROUP_RANK or the host name when the launcher sets "
                 "LOCAL_RANK and LOCAL_WORLD_SIZE, else a node of one rail)")
      ->group("Run");
  cli::add_number(app, "--rail", f.rail, 0, 1023, "this rank's rail in its node (LOCAL_RANK)")
      ->group("Run");
  cli::add_number(app, "--rails", f.rails, 1, 1024,
                  "the node's ranks, one per rail (LOCAL_WORLD_SIZE)")
      ->group("Run");
  cli::add_number(app, "--steps", f.steps, 0, UINT64_MAX,
                  "stop after N completed steps; 0: run until stopped")
      ->group("Run");
  cli::add_number(app, "--step-delay-ms", f.step_delay_ms, 0, 3'600'000,
                  "sleep between steps, standing in for local compute")
      ->group("Run");
  cli::add_number(app, "--connect-timeout-ms", f.connect_timeout_ms, 1, 86'400'000,
                  "give up joining after N ms")
      ->group("Run");
  app.add_option("--listen", f.listen, "where neighbours connect for data (port 0: a free port)")
      ->type_name("HOST:PORT")
      ->group("Network");
  app.add_option("--advertise", f.advertise,
                 "what other peers connect to: HOST:PORT (a port forward) or HOST "
                 "(default: the address the master sees, with the listening port)")
      ->type_name("ADDR")
      ->group("Network");
  cli::add_number(app, "--connections", f.connections, 1, 64,
                  "TCP connections per data link, 1..64")
      ->group("Network");
  app.add_flag("--full-mesh", f.full_mesh,
               "link to every peer of the group (needed by --schedule direct)")
      ->group("Network");
}

void add_security(CLI::App& app, Flags& f) {
  app.add_option("--secret-file", f.secret_file,
                 "the cluster secret (must match the master's --secret-file)")
      ->type_name("PATH")
      ->group("Security");
  app.add_option("--secret", f.secret,
                 "the secret itself (visible to other local users in ps; prefer the file)")
      ->type_name("STRING")
      ->group("Security");
  app.add_flag("--allow-weak-secret", f.allow_weak_secret,
               "accept a secret file that its group or others may read, or a secret shorter "
               "than 16 bytes (refused otherwise)")
      ->group("Security");
  app.add_option("--tls-cert", f.tls_cert, "PEM certificate and key: every connection uses TLS 1.3")
      ->type_name("PATH")
      ->group("Security");
  app.add_option("--tls-key", f.tls_key, "the certificate's private key (PEM)")
      ->type_name("PATH")
      ->group("Security");
  app.add_option("--tls-ca", f.tls_ca,
                 "verify the master's and the neighbours' certificates against this CA")
      ->type_name("PATH")
      ->group("Security");
}

void add_workload(CLI::App& app, Flags& f) {
  app.add_option("--tensor-size", f.tensor_sizes,
                 "f32 elements of each state tensor; repeatable; every peer of a "
                 "group must use the same sizes")
      ->type_name("N[,N...]")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->transform(cli::whole_number(1, uint64_t{1} << 32))
      ->default_str(fmt::format("{}", fmt::join(f.tensor_sizes, ",")))
      ->group("Workload");
  cli::add_choice(app, "--codec", f.codec,
                  {{"none", LH_CODEC_NONE},
                   {"fp16", LH_CODEC_FP16},
                   {"bf16", LH_CODEC_BF16},
                   {"u8", LH_CODEC_U8},
                   {"u4", LH_CODEC_U4}},
                  "none, fp16, bf16, u8 or u4")
      ->type_name("C")
      ->group("Workload");
  cli::add_choice(
      app, "--schedule", f.schedule,
      {{"auto", LH_SCHEDULE_AUTO}, {"ring", LH_SCHEDULE_RING}, {"direct", LH_SCHEDULE_DIRECT}},
      "auto, ring or direct")
      ->type_name("S")
      ->group("Workload");
  cli::add_number(app, "--inflight", f.inflight, 1, 64,
                  "all-reduce operations per tensor per step, 1..64")
      ->group("Workload");
  cli::add_number(app, "--allgather-bytes", f.allgather_bytes, 0, 1 << 20,
                  "after each step's all-reduce, all-gather this many bytes (0 or >= 16) per "
                  "peer (its id, its step, bytes that follow from both), check every record "
                  "against the ring and hash them into the shared state; 0: off")
      ->group("Workload");
  cli::add_number(app, "--seed", f.seed, 0, UINT64_MAX,
                  "seed of the pseudo-updates (the same on every peer)")
      ->group("Workload");
  app.add_option("--retry", f.retry,
                 "step: a failed all-reduce fails the step, which starts again "
                 "after update_topology; batch: the step's all-reduces run through "
                 "lh_allreduce_batch, which retries on the new ring itself")
      ->type_name("step|batch")
      ->check(cli::one_of({"step", "batch"}))
      ->group("Workload");
  cli::add_number(app, "--batch-attempts", f.batch_attempts, 1, 1000,
                  "attempts of lh_allreduce_batch")
      ->group("Workload");
  app.add_flag("--fault-drop-updates", f.fault_drop_updates,
               "test hook: every step's all-reduces and sync run, but no member applies or "
               "counts the averaged update (the state stays the same everywhere): a group "
               "that trains nothing, which longhaul-churn's progress check must flag")
      ->group("Workload");
  app.add_option("--log-level", f.log_level,
                 "the library's log level on stderr: debug, info, warn, error, off")
      ->type_name("LEVEL")
      ->check(cli::one_of({"debug", "info", "warn", "error", "off"}))
      ->group("Other");
  app.add_option("--log-format", f.log_format,
                 "the library's log lines: text, or json for one JSON object per line (the same "
                 "as LONGHAUL_LOG_FORMAT; docs/operations.md)")
      ->type_name("FORMAT")
      ->check(cli::one_of({"text", "json"}))
      ->group("Other");
}

}  // namespace

std::optional<int> parse_flags(int argc, char** argv, Flags* f) {
  CLI::App app{kDescription, "longhaul-peer"};
  cli::configure(app, kFooter, "longhaul-peer --master HOST:PORT [options]");
  add_run_and_network(app, *f);
  add_security(app, *f);
  add_workload(app, *f);
  if (auto exit_status = cli::parse(app, argc, argv)) return exit_status;
  if (f->tls_cert.empty() != f->tls_key.empty())
    return cli::usage_error(app, "--tls-cert and --tls-key must be given together");
  if (!f->tls_ca.empty() && f->tls_cert.empty())
    return cli::usage_error(
        app, "--tls-ca needs --tls-cert and --tls-key (a peer serves its neighbours' links)");
  if (!f->secret_file.empty()) {
    auto secret = longhaul::read_secret_file(f->secret_file, f->allow_weak_secret);
    if (!secret) return cli::usage_error(app, secret.status().message());
    f->secret = std::move(*secret);
  }
  if (f->allgather_bytes > 0 && f->allgather_bytes < 16)
    return cli::usage_error(app,
                            "--allgather-bytes must be 0 or at least 16 (the record's header)");
  if (f->schedule == LH_SCHEDULE_DIRECT) f->full_mesh = true;
  if (f->rail >= f->rails)
    return cli::usage_error(app,
                            fmt::format("--rail {} must be below --rails {}", f->rail, f->rails));
  if (f->rails > 1 && f->node.empty()) return cli::usage_error(app, "--rails above 1 needs --node");
  f->group_given = app.get_option("--group")->count() > 0;
  if (!f->group_given && !f->node.empty()) f->group = f->rail;
  return std::nullopt;
}

}  // namespace longhaul_peer
