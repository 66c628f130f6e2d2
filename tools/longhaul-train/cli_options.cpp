#include "cli_options.hpp"

#include <cmath>

#include "common/secret_file.hpp"
#include "tool_cli.hpp"

namespace longhaul::train::cli {
namespace {

namespace tool = longhaul::cli;

constexpr const char* kDescription =
    "Trains the byte-level GPT and writes OUT/log.csv, OUT/loss.png, OUT/checkpoint.bin. Alone "
    "by default; with --master, as one peer of a group that trains one model together "
    "(docs/trainer.md).\n";
constexpr uint64_t kIntMax = INT32_MAX, kInt64Max = INT64_MAX;

// Numbers the flags carry in another form than TrainOptions keeps them, and the flags whose
// meaning depends on others (was it given?).
struct Scratch {
  std::uint64_t seed;
  double lr, min_lr;
  std::vector<CLI::Option*> peer_flags;    // meaningless without --master
  std::vector<CLI::Option*> engine_flags;  // meaningless with --method dp
  CLI::Option *fragments = nullptr, *delay = nullptr;
  CLI::Option *outer_lr = nullptr, *outer_momentum = nullptr;
  std::vector<CLI::Option*> co2_only;     // flags of CO2's outer optimizer alone
  std::vector<CLI::Option*> sparse_only;  // flags of --codec sparse alone
};

void add_data_and_model(CLI::App& app, Options& o) {
  app.add_option("--data", o.data,
                 "text file, or directory of *.py files (repeatable; order kept). "
                 "Default: Python's standard library (python3 sysconfig 'stdlib').")
      ->type_name("PATH")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->default_str("")
      ->group("Data");
  GptConfig& m = o.train.model;
  tool::add_number(app, "--layers", m.layers, 0, kIntMax, "transformer blocks")->group("Model");
  tool::add_number(app, "--channels", m.channels, 0, kIntMax, "model width")->group("Model");
  tool::add_number(app, "--heads", m.heads, 0, kIntMax, "attention heads; they divide --channels")
      ->group("Model");
  tool::add_number(app, "--context", m.context, 0, kIntMax, "bytes per sequence")->group("Model");
}

void add_training(CLI::App& app, Options& o, Scratch& s) {
  TrainOptions& t = o.train;
  tool::add_number(app, "--steps", o.steps, 0, kInt64Max,
                   "total optimizer steps (also the cosine schedule's length)")
      ->group("Training");
  tool::add_number(app, "--stop-at", o.stop_at, 0, kInt64Max,
                   "stop after step N as if interrupted (checkpoint saved; --resume it)")
      ->default_str("")
      ->group("Training");
  tool::add_number(app, "--batch", t.batch, 0, kIntMax, "sequences of --context bytes per step")
      ->group("Training");
  tool::add_number(app, "--lr", s.lr, 0, HUGE_VAL, "peak learning rate")->group("Training");
  tool::add_number(app, "--min-lr", s.min_lr, 0, HUGE_VAL, "learning rate at the end")
      ->group("Training");
  tool::add_number(app, "--warmup", t.schedule.warmup_steps, 0, kInt64Max, "steps of linear warmup")
      ->group("Training");
  tool::add_number(app, "--weight-decay", t.adamw.weight_decay, -HUGE_VAL, HUGE_VAL,
                   "AdamW weight decay")
      ->group("Training");
  tool::add_number(app, "--beta1", t.adamw.beta1, -HUGE_VAL, HUGE_VAL, "AdamW beta1")
      ->group("Training");
  tool::add_number(app, "--beta2", t.adamw.beta2, -HUGE_VAL, HUGE_VAL, "AdamW beta2")
      ->group("Training");
  tool::add_number(app, "--clip", t.grad_clip, -HUGE_VAL, HUGE_VAL,
                   "max global gradient norm; 0: off")
      ->group("Training");
  tool::add_number(app, "--seed", s.seed, 0, UINT64_MAX, "initialisation and batch sampling")
      ->group("Training");
  tool::add_number(app, "--threads", o.threads, 0, kIntMax, "0: one per hardware thread")
      ->group("Training");
}

void add_output(CLI::App& app, Options& o) {
  const std::string group = "Evaluation and output";
  tool::add_number(app, "--val-every", o.val_every, 0, kIntMax,
                   "steps between validation runs (and at the end)")
      ->group(group);
  tool::add_number(app, "--val-batches", o.val_batches, 0, kIntMax, "batches per validation run")
      ->group(group);
  app.add_option("--out", o.out_dir, "where log.csv, loss.png and checkpoint.bin go")
      ->type_name("DIR")
      ->group(group);
  tool::add_number(app, "--checkpoint-every", o.checkpoint_every, 0, kIntMax,
                   "steps between checkpoints; 0: only at the end")
      ->group(group);
  app.add_option("--resume", o.resume,
                 "continue from this checkpoint.bin, or the directory holding it (a peer of the "
                 "sync engine's methods also reads engine.bin there)")
      ->type_name("PATH")
      ->group(group);
  app.add_flag_callback(
         "--no-plot", [&o] { o.plot = false; }, "skip loss.png (and a peer's timeline.png)")
      ->group(group);
  app.add_option("--plot-script", o.plot_script, "the plotter that draws loss.png")
      ->type_name("FILE")
      ->group(group);
  app.add_option("--timeline-script", o.timeline_script,
                 "the plotter that draws a peer's timeline.png from its timeline.csv")
      ->type_name("FILE")
      ->group(group);
  app.add_flag("--profile", o.profile, "print the per-layer time breakdown")->group(group);
  app.add_flag("--json", o.json, "print a JSON summary as the last line of stdout")->group(group);
  tool::add_number(app, "--bench-warmup", o.bench_warmup, 0, kIntMax,
                   "leave the first N steps out of tokens/s")
      ->group(group);
  app.add_option("--dump-dir", o.dump_dir,
                 "an engine method writes its parameters around the --dump-steps here (raw f32: "
                 "init.bin, step-S-local/global/restart.bin, final-global.bin)")
      ->type_name("DIR")
      ->group(group);
  app.add_option("--dump-steps", o.dump_steps, "the steps whose syncs --dump-dir records")
      ->delimiter(',')
      ->type_name("S,...")
      ->needs("--dump-dir")
      ->group(group);
}

void add_group(CLI::App& app, PeerOptions& p, Scratch& s) {
  const std::string group = "Peers (with --master)";
  app.add_option("--master", p.master, "train as a peer of this master's run (default: alone)")
      ->type_name("HOST:PORT")
      ->group(group);
  const auto flag = [&](CLI::Option* o) {
    s.peer_flags.push_back(o->group(group));
    return o;
  };
  flag(app.add_option("--secret-file", p.secret_file, "the cluster secret (the master's)")
           ->type_name("PATH"));
  flag(app.add_option("--listen", p.listen, "where neighbours connect for data (port 0: any)")
           ->type_name("HOST:PORT"));
  flag(app.add_option("--advertise", p.advertise,
                      "what other peers connect to: HOST:PORT or HOST (default: the address "
                      "the master sees, with the listening port)")
           ->type_name("ADDR"));
  flag(tool::add_number(app, "--peers", p.peers, 1, 4096,
                        "peers that start together (each waits for all), and the number of "
                        "contiguous shards the training split is cut into"));
  flag(tool::add_number(app, "--peer-index", p.peer_index, 0, 4095,
                        "this peer's shard of the training split, 0 .. --peers - 1"));
  flag(app.add_flag("--join", p.join,
                    "join a running group (it takes the group's state and step) instead of "
                    "starting one"));
  flag(app.add_flag("--full-mesh", p.full_mesh,
                    "link to every peer of the group (the direct all-reduce schedule)"));
  flag(tool::add_number(app, "--connections", p.connections, 1, 64,
                        "TCP connections per data link, 1..64"));
  flag(tool::add_number(app, "--theta-every", p.theta_every, 0, kInt64Max,
                        "for a supervisor (longhaul-churn): print 'JOINED id= epoch= world= "
                        "step= round_every=' on stdout once training with the group, 'THETA "
                        "step= hash= world= epoch= rounds=' after every N-th step (the hash of "
                        "the state every peer holds bit-identical at that step, the rounds "
                        "applied so far) and 'VAL step= loss=' after each validation; 0: none"));
}

void add_sync(CLI::App& app, PeerOptions& p, Scratch& s) {
  const std::string group = "Sync (with --master)";
  lh_sync_engine_options& e = p.sync;
  s.peer_flags.push_back(
      tool::add_choice(app, "--method", p.method,
                       {{"dp", Method::kDataParallel},
                        {"diloco", Method::kDiLoCo},
                        {"streaming", Method::kStreaming},
                        {"co2", Method::kCo2},
                        {"eager", Method::kEager}},
                       "dp: average the gradients every step; diloco, streaming (DiLoCo with "
                       "--fragments and --delay), co2, eager: the sync engine's outer loops")
          ->type_name("M")
          ->group(group));
  s.peer_flags.push_back(tool::add_choice(app, "--codec", e.codec,
                                          {{"none", LH_CODEC_NONE},
                                           {"fp16", LH_CODEC_FP16},
                                           {"bf16", LH_CODEC_BF16},
                                           {"u8", LH_CODEC_U8},
                                           {"u4", LH_CODEC_U4},
                                           {"e3m0", LH_CODEC_E3M0},
                                           {"sparse", LH_CODEC_SPARSE}},
                                          "wire codec of what is averaged (pseudo-gradients; "
                                          "dp: gradients); sparse: the top-k of each chunk with "
                                          "error feedback (diloco and streaming only)")
                             ->type_name("C")
                             ->group(group));
  const auto engine = [&](CLI::Option* o) {
    s.engine_flags.push_back(o->group(group));
    s.peer_flags.push_back(o);
    return o;
  };
  engine(tool::add_number(app, "--sync-every", e.sync_every, 1, UINT32_MAX,
                          "H: inner steps between two syncs of a fragment"));
  s.fragments = engine(tool::add_number(app, "--fragments", e.fragments, 1, 4096,
                                        "F: fragments synced in turn (--method streaming: 4)"));
  s.delay = engine(tool::add_number(app, "--delay", e.delay, 0, UINT32_MAX,
                                    "tau: steps from a round's launch to its outer update "
                                    "(--method streaming: 1)"));
  engine(app.add_flag("--adaptive-delay", e.adaptive_delay,
                      "size tau at every H steps to the slowest peer's measured sync time "
                      "(diloco and streaming; --delay is the first cycle's tau)"));
  engine(tool::add_number(app, "--max-staleness-steps", e.max_staleness_steps, 1, UINT32_MAX,
                          "with --adaptive-delay: the most steps a round may stay in flight"));
  engine(tool::add_number(app, "--mix", e.mix, 0.0, 1.0,
                          "alpha of the merge local <- alpha*local + (1-alpha)*global, below 1"));
  s.outer_lr = engine(tool::add_number(app, "--outer-lr", e.outer_lr, 0.0, HUGE_VAL,
                                       "outer learning rate (--method co2: 1.0)"));
  s.outer_momentum = engine(tool::add_number(app, "--outer-momentum", e.outer_momentum, 0.0, 1.0,
                                             "outer momentum (--method co2: 0.2)"));
  s.co2_only.push_back(engine(tool::add_number(
      app, "--co2-gap-penalty", e.co2_gap_penalty, 1.0, HUGE_VAL,
      "CO2's staleness gap penalty: the delayed average is divided by it (1: off)")));
  s.co2_only.push_back(
      engine(tool::add_number(app, "--co2-clip", e.co2_clip, 0.0, HUGE_VAL,
                              "CO2's outer momentum, clipped element-wise to [-X, X] (0: off)")));
  s.sparse_only.push_back(
      engine(tool::add_number(app, "--topk-per-chunk", e.topk_per_chunk, 1, UINT32_MAX,
                              "with --codec sparse: values sent of each chunk at most")));
  s.sparse_only.push_back(engine(tool::add_number(app, "--chunk", e.chunk, 1, 65535,
                                                  "with --codec sparse: elements per chunk")));
  engine(tool::add_number(app, "--deadline-ms", e.deadline_ms, 0, UINT32_MAX,
                          "a round not done this long after its launch is dropped on every peer "
                          "(this peer's own; 0: none)"));
  engine(app.add_flag("--adaptive-deadline", e.adaptive_deadline,
                      "the deadline follows the group: median + max(4 MAD, median/2) of the "
                      "fastest peer's sync time over the last 16 rounds, within [1 s, "
                      "--deadline-ms] (docs/training.md)"));
  engine(tool::add_choice(app, "--on-loss", e.on_loss,
                          {{"retry", LH_LOSS_RETRY}, {"drop", LH_LOSS_DROP}},
                          "a round that lost a peer: run it again over the survivors, or drop it")
             ->type_name("P"));
}

// The method's own defaults where its flags were not given.
void resolve_method(PeerOptions& p, const Scratch& s) {
  lh_sync_engine_options& e = p.sync;
  if (p.method == Method::kStreaming) {
    if (s.fragments->count() == 0) e.fragments = 4;
    if (s.delay->count() == 0) e.delay = 1;
  }
  if (p.method == Method::kCo2) {
    // CO2's outer optimizer has its own fields; the flags mean "the outer optimizer's".
    if (s.outer_lr->count() > 0) e.co2_lr = e.outer_lr;
    if (s.outer_momentum->count() > 0) e.co2_momentum = e.outer_momentum;
  }
}

// Flags that only mean something with others.
Status check_peer(const Options& o, const Scratch& s) {
  const PeerOptions& p = o.peer;
  const auto first_given = [](const std::vector<CLI::Option*>& flags) -> const CLI::Option* {
    for (const CLI::Option* f : flags)
      if (f->count() > 0) return f;
    return nullptr;
  };
  if (p.master.empty()) {
    if (const CLI::Option* f = first_given(s.peer_flags))
      return invalid_argument(f->get_name() + " needs --master");
    return Status::ok();
  }
  if (p.peer_index >= p.peers) return invalid_argument("--peer-index must be below --peers");
  if (p.method == Method::kDataParallel) {
    if (const CLI::Option* f = first_given(s.engine_flags))
      return invalid_argument(f->get_name() +
                              " is a setting of the sync engine, not of --method dp");
  } else if (p.join && !o.resume.empty()) {
    return invalid_argument("--join takes the group's state: it cannot --resume the engine's");
  }
  if (p.method != Method::kCo2)
    if (const CLI::Option* f = first_given(s.co2_only))
      return invalid_argument(f->get_name() + " is a setting of --method co2");
  const bool sparse = p.sync.codec == LH_CODEC_SPARSE;
  if (!sparse)
    if (const CLI::Option* f = first_given(s.sparse_only))
      return invalid_argument(f->get_name() + " is a setting of --codec sparse");
  if (sparse && p.method != Method::kDiLoCo && p.method != Method::kStreaming)
    return invalid_argument(
        std::string("--codec sparse runs with --method diloco or streaming, not ") +
        method_name(p.method));
  if (p.sync.mix >= 1.0f) return invalid_argument("--mix must be below 1");
  if (p.sync.adaptive_deadline && p.sync.deadline_ms == 0)
    return invalid_argument(
        "--adaptive-deadline needs --deadline-ms > 0: the most the deadline may be, and the "
        "first rounds' deadline");
  return Status::ok();
}

Status read_secret(PeerOptions& p) {
  if (p.secret_file.empty()) return Status::ok();
  Result<std::string> secret = read_secret_file(p.secret_file);
  if (!secret) return secret.status();
  p.secret = std::move(*secret);
  return Status::ok();
}

// What the flags cannot say one at a time: counts that must be positive, a model that fits.
Status check(const Options& o, const Scratch& s) {
  if (o.steps < 1) return invalid_argument("--steps must be positive");
  if (o.val_every < 1 || o.val_batches < 1)
    return invalid_argument("--val-every and --val-batches must be positive");
  if (s.lr <= 0) return invalid_argument("--lr must be positive and --min-lr >= 0");
  LH_RETURN_IF_ERROR(check_peer(o, s));
  return o.train.model.validate();
}

}  // namespace

const char* method_name(Method method) {
  switch (method) {
    case Method::kDataParallel:
      return "dp";
    case Method::kDiLoCo:
      return "diloco";
    case Method::kStreaming:
      return "streaming";
    case Method::kCo2:
      return "co2";
    case Method::kEager:
      return "eager";
  }
  return "?";
}

std::optional<int> parse(int argc, char** argv, Options* o) {
  CLI::App app{kDescription, "longhaul-train"};
  tool::configure(app, "");
  TrainOptions& t = o->train;
  Scratch s{t.init_seed, t.schedule.max_lr, t.schedule.min_lr, {}, {}, nullptr,
            nullptr,     nullptr,           nullptr,           {}, {}};
  lh_sync_engine_options_init(&o->peer.sync);
  add_data_and_model(app, *o);
  add_training(app, *o, s);
  add_output(app, *o);
  add_group(app, o->peer, s);
  add_sync(app, o->peer, s);
  if (auto exit_status = tool::parse(app, argc, argv)) return exit_status;
  if (Status st = check(*o, s); !st) return tool::usage_error(app, st.message());
  if (Status st = read_secret(o->peer); !st) return tool::usage_error(app, st.message());
  t.init_seed = s.seed;
  t.data_seed = s.seed ^ 0x5EEDDA7Aull;  // a different stream from the initialisation's
  t.schedule.max_lr = static_cast<float>(s.lr);
  t.schedule.min_lr = static_cast<float>(s.min_lr);
  t.schedule.total_steps = o->steps;
  resolve_method(o->peer, s);
  return std::nullopt;
}

}  // namespace longhaul::train::cli
