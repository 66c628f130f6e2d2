#include "peer_flags.hpp"

#include <string_view>

#include "common/flag_value.hpp"
#include "common/parse_number.hpp"
#include "common/secret_file.hpp"

namespace longhaul_peer {

std::string usage() {
  return R"(longhaul-peer: a peer daemon that joins a longhaul run and trains a synthetic workload.

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

Usage: longhaul-peer --master HOST:PORT [options]

Run:
  --master HOST:PORT     the longhaul-master to join (required)
  --group N              peer group (default 0); peers reduce with their own group only
  --steps N              stop after N completed steps (default 0: run until stopped)
  --step-delay-ms N      sleep between steps, standing in for local compute (default 0)
  --connect-timeout-ms N give up joining after N ms (default 60000)

Network:
  --listen HOST:PORT     where neighbours connect for data (default 0.0.0.0:0, a free port)
  --advertise ADDR       what other peers connect to: HOST:PORT (a port forward) or HOST
                         (default: the address the master sees, with the listening port)
  --connections N        TCP connections per data link, 1..64 (default 1)
  --full-mesh            link to every peer of the group (needed by --schedule direct)

Security:
  --secret-file PATH     the cluster secret (must match the master's --secret-file)
  --secret STRING        the secret itself (visible to other local users in ps; prefer the file)
  --tls-cert PATH        PEM certificate and key: every connection uses TLS 1.3
  --tls-key PATH
  --tls-ca PATH          verify the master's and the neighbours' certificates against this CA

Workload:
  --tensor-size N[,N...] f32 elements of each state tensor; repeatable (default 262144,65536,4097)
                         every peer of a group must use the same sizes
  --codec C              none, fp16, bf16, u8 or u4 (default none)
  --schedule S           auto, ring or direct (default auto)
  --inflight N           all-reduce operations per tensor per step, 1..64 (default 2)
  --seed N               seed of the pseudo-updates (default 1; the same on every peer)
  --retry step|batch     step (default): a failed all-reduce fails the step, which starts again
                         after update_topology; batch: the step's all-reduces run through
                         lh_allreduce_batch, which retries on the new ring itself
  --batch-attempts N     attempts of lh_allreduce_batch (default 3)

Other:
  --log-level LEVEL      the library's log level on stderr: debug, info, warn (default), error, off
  --help                 show this text

Output (stdout, one line per event, key=value, flushed at once):
  LISTEN port=P                         the data listener's port (before joining)
  JOINED id=I epoch=E world=W
  STEP step=S rev=R hash=H world=W epoch=E id=I ar_ms=.. sync_ms=.. rx=.. tx=.. fetched=.. aborts=A
                                        after each completed step S of the group (S = R - 1):
                                        the state's revision R and hash
                                        (peers at the same R hold the same H), the all-reduce and
                                        sync times, the sync's bytes and blocks fetched, the aborts
                                        the master pushed so far
  RETRY step=S phase=allreduce|sync status=LH_ERR_.. message=".."
  TOPOLOGY epoch=E world=W              after an update_topology that changed the epoch
  LEFT reason=".."                      after a graceful leave (exit status 0)
  ERROR what=.. status=LH_ERR_.. message=".."   (then exit status 1)

Example:
  longhaul-master --listen 127.0.0.1:48484 &
  longhaul-peer --master 127.0.0.1:48484 --codec u8 &
  longhaul-peer --master 127.0.0.1:48484 --codec u8
)";
}

namespace {}  // namespace

bool parse_flags(int argc, char** argv, Flags* f, std::string* error) {
  bool sizes_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      f->help = true;
      return true;
    }
    if (arg == "--full-mesh") {
      f->full_mesh = true;
      continue;
    }
    std::string value;
    if (!longhaul::take_flag_value(argc, argv, &i, &arg, &value)) {
      *error = std::string(arg) + " needs a value (see --help)";
      return false;
    }
    const auto number = [&](uint64_t min, uint64_t max, uint64_t* out) {
      if (longhaul::parse_u64(value, min, max, out)) return true;
      *error = std::string(arg) + " needs a whole number in " + std::to_string(min) + ".." +
               std::to_string(max) + ", got '" + value + "'";
      return false;
    };
    uint64_t n = 0;
    if (arg == "--master") {
      f->master = value;
    } else if (arg == "--secret") {
      f->secret = value;
    } else if (arg == "--secret-file") {
      auto secret = longhaul::read_secret_file(value);
      if (!secret) {
        *error = secret.status().message();
        return false;
      }
      f->secret = std::move(*secret);
    } else if (arg == "--tls-cert") {
      f->tls_cert = value;
    } else if (arg == "--tls-key") {
      f->tls_key = value;
    } else if (arg == "--tls-ca") {
      f->tls_ca = value;
    } else if (arg == "--listen") {
      f->listen = value;
    } else if (arg == "--advertise") {
      f->advertise = value;
    } else if (arg == "--log-level") {
      f->log_level = value;
    } else if (arg == "--group") {
      if (!number(0, UINT32_MAX, &n)) return false;
      f->group = static_cast<uint32_t>(n);
    } else if (arg == "--connections") {
      if (!number(1, 64, &n)) return false;
      f->connections = static_cast<uint32_t>(n);
    } else if (arg == "--inflight") {
      if (!number(1, 64, &n)) return false;
      f->inflight = static_cast<uint32_t>(n);
    } else if (arg == "--retry") {
      if (value != "step" && value != "batch") {
        *error = "--retry must be step or batch, got '" + value + "'";
        return false;
      }
      f->retry = value;
    } else if (arg == "--batch-attempts") {
      if (!number(1, 1000, &n)) return false;
      f->batch_attempts = static_cast<uint32_t>(n);
    } else if (arg == "--steps") {
      if (!number(0, UINT64_MAX, &n)) return false;
      f->steps = n;
    } else if (arg == "--step-delay-ms") {
      if (!number(0, 3'600'000, &n)) return false;
      f->step_delay_ms = static_cast<uint32_t>(n);
    } else if (arg == "--connect-timeout-ms") {
      if (!number(1, 86'400'000, &n)) return false;
      f->connect_timeout_ms = static_cast<uint32_t>(n);
    } else if (arg == "--seed") {
      if (!number(0, UINT64_MAX, &n)) return false;
      f->seed = n;
    } else if (arg == "--tensor-size") {
      if (!sizes_given) f->tensor_sizes.clear();
      sizes_given = true;
      std::string_view rest = value;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        value = std::string(rest.substr(0, comma));
        if (!number(1, uint64_t{1} << 32, &n)) return false;
        f->tensor_sizes.push_back(static_cast<size_t>(n));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    } else if (arg == "--codec") {
      if (value == "none")
        f->codec = LH_CODEC_NONE;
      else if (value == "fp16")
        f->codec = LH_CODEC_FP16;
      else if (value == "bf16")
        f->codec = LH_CODEC_BF16;
      else if (value == "u8")
        f->codec = LH_CODEC_U8;
      else if (value == "u4")
        f->codec = LH_CODEC_U4;
      else {
        *error = "--codec must be none, fp16, bf16, u8 or u4, got '" + value + "'";
        return false;
      }
    } else if (arg == "--schedule") {
      if (value == "auto")
        f->schedule = LH_SCHEDULE_AUTO;
      else if (value == "ring")
        f->schedule = LH_SCHEDULE_RING;
      else if (value == "direct")
        f->schedule = LH_SCHEDULE_DIRECT;
      else {
        *error = "--schedule must be auto, ring or direct, got '" + value + "'";
        return false;
      }
    } else {
      *error = "unknown option '" + std::string(arg) + "' (see --help)";
      return false;
    }
  }
  if (f->help) return true;
  if (f->master.empty()) {
    *error = "--master HOST:PORT is required (see --help)";
    return false;
  }
  if (f->tls_cert.empty() != f->tls_key.empty()) {
    *error = "--tls-cert and --tls-key must be given together";
    return false;
  }
  if (!f->tls_ca.empty() && f->tls_cert.empty()) {
    *error = "--tls-ca needs --tls-cert and --tls-key (a peer serves its neighbours' links)";
    return false;
  }
  if (f->schedule == LH_SCHEDULE_DIRECT) f->full_mesh = true;
  return true;
}

}  // namespace longhaul_peer
