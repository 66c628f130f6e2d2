#include "cli_options.hpp"

#include <charconv>
#include <functional>
#include <map>
#include <string_view>

namespace longhaul::train::cli {

namespace {

template <class T>
Status parse_number(std::string_view flag, std::string_view text, T* out) {
  const char* end = text.data() + text.size();
  std::from_chars_result r = std::from_chars(text.data(), end, *out);
  if (r.ec != std::errc() || r.ptr != end) {
    return invalid_argument(std::string(flag) + ": not a number: '" + std::string(text) + "'");
  }
  return Status::ok();
}

}  // namespace

std::string usage() {
  return R"(usage: longhaul-train [FLAGS]
Trains the byte-level GPT on one process and writes OUT/log.csv, OUT/loss.png, OUT/checkpoint.bin.

data
  --data PATH           text file, or directory of *.py files (repeatable; order kept).
                        Default: Python's standard library (python3 sysconfig 'stdlib').
model
  --layers N (5) --channels N (128) --heads N (4) --context N (128)
training
  --steps N (300)       total optimizer steps (also the cosine schedule's length)
  --stop-at N           stop after step N as if interrupted (checkpoint saved; --resume it)
  --batch N (16)        sequences of --context bytes per step
  --lr X (3e-3) --min-lr X (3e-4) --warmup N (50)
  --weight-decay X (0.1) --beta1 X (0.9) --beta2 X (0.95) --clip X (1.0, 0: off)
  --seed N (1337)       initialisation and batch sampling
  --threads N (0)       0: one per hardware thread
evaluation and output
  --val-every N (50) --val-batches N (16)
  --out DIR (train-out) --checkpoint-every N (0: only at the end) --resume FILE
  --no-plot             skip loss.png; --plot-script FILE to use another plotter
  --profile             print the per-layer time breakdown
  --json                print a JSON summary as the last line of stdout
  --bench-warmup N (0)  leave the first N steps out of tokens/s
)";
}

Result<Options> parse(int argc, char** argv) {
  Options o;
  TrainOptions& t = o.train;
  std::uint64_t seed = t.init_seed;
  double lr = t.schedule.max_lr, min_lr = t.schedule.min_lr;
  using Setter = std::function<Status(std::string_view)>;
  const auto num = [](auto* field) -> Setter {
    return [field](std::string_view v) { return parse_number("flag", v, field); };
  };
  const std::map<std::string_view, Setter> valued = {
      {"--data",
       [&](std::string_view v) {
         o.data.emplace_back(v);
         return Status::ok();
       }},
      {"--layers", num(&t.model.layers)},
      {"--channels", num(&t.model.channels)},
      {"--heads", num(&t.model.heads)},
      {"--context", num(&t.model.context)},
      {"--steps", num(&o.steps)},
      {"--stop-at", num(&o.stop_at)},
      {"--batch", num(&t.batch)},
      {"--lr", num(&lr)},
      {"--min-lr", num(&min_lr)},
      {"--warmup", num(&t.schedule.warmup_steps)},
      {"--weight-decay", num(&t.adamw.weight_decay)},
      {"--beta1", num(&t.adamw.beta1)},
      {"--beta2", num(&t.adamw.beta2)},
      {"--clip", num(&t.grad_clip)},
      {"--seed", num(&seed)},
      {"--threads", num(&o.threads)},
      {"--val-every", num(&o.val_every)},
      {"--val-batches", num(&o.val_batches)},
      {"--checkpoint-every", num(&o.checkpoint_every)},
      {"--out",
       [&](std::string_view v) {
         o.out_dir = v;
         return Status::ok();
       }},
      {"--resume",
       [&](std::string_view v) {
         o.resume = v;
         return Status::ok();
       }},
      {"--plot-script",
       [&](std::string_view v) {
         o.plot_script = v;
         return Status::ok();
       }},
      {"--bench-warmup", num(&o.bench_warmup)},
  };
  const std::map<std::string_view, bool*> switches = {{"--no-plot", nullptr},
                                                      {"--profile", &o.profile},
                                                      {"--json", &o.json},
                                                      {"--help", &o.help},
                                                      {"-h", &o.help}};
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (auto s = switches.find(flag); s != switches.end()) {
      if (s->second != nullptr) *s->second = true;
      if (flag == "--no-plot") o.plot = false;
      continue;
    }
    auto v = valued.find(flag);
    if (v == valued.end()) return invalid_argument("unknown flag " + std::string(flag));
    if (i + 1 >= argc) return invalid_argument(std::string(flag) + " needs a value");
    Status st = v->second(argv[++i]);
    if (!st) return invalid_argument(std::string(flag) + ": " + st.message());
  }
  t.init_seed = seed;
  t.data_seed = seed ^ 0x5EEDDA7Aull;  // a different stream from the initialisation's
  t.schedule.max_lr = static_cast<float>(lr);
  t.schedule.min_lr = static_cast<float>(min_lr);
  t.schedule.total_steps = o.steps;
  if (o.steps < 1) return invalid_argument("--steps must be positive");
  if (o.val_every < 1 || o.val_batches < 1)
    return invalid_argument("--val-every and --val-batches must be positive");
  if (o.checkpoint_every < 0 || o.bench_warmup < 0 || o.stop_at < 0)
    return invalid_argument("negative count");
  if (lr <= 0 || min_lr < 0) return invalid_argument("--lr must be positive and --min-lr >= 0");
  LH_RETURN_IF_ERROR(t.model.validate());
  return o;
}

}  // namespace longhaul::train::cli
