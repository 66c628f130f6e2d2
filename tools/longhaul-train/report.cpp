#include "report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/cpu_isa.hpp"
#include "common/log.hpp"
#include "train/blas.hpp"
#include "train/param_layout.hpp"
#include "train/threads.hpp"

namespace longhaul::train::cli {
namespace {

using Json = nlohmann::ordered_json;

// x rounded to `decimals` places, as the --json figures always were.
double rounded(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

// Milliseconds per step of each phase that took any time: "<phase>_fwd", "<phase>_bwd".
Json breakdown_json(const Profile& prof, std::int64_t steps) {
  Json out = Json::object();
  for (int i = 0; i < static_cast<int>(Phase::kCount); ++i) {
    const auto p = static_cast<Phase>(i);
    for (bool backward : {false, true}) {
      const double s = prof.seconds(p, backward);
      if (s == 0.0) continue;
      out[fmt::format("{}_{}", phase_name(p), backward ? "bwd" : "fwd")] =
          rounded(1e3 * s / static_cast<double>(steps), 3);
    }
  }
  return out;
}

// The fields a lone run and a peer share: throughput, the model, the losses.
Json run_fields(const Options& o, const RunSummary& r) {
  const GptConfig& mc = o.train.model;
  return {
      {"tokens_per_s", rounded(r.tokens_per_s, 1)},
      {"steps", r.steps},
      {"measured_steps", r.measured_steps},
      {"batch", o.train.batch},
      {"context", mc.context},
      {"layers", mc.layers},
      {"channels", mc.channels},
      {"heads", mc.heads},
      {"params", parameter_count(mc)},
      {"threads", thread_count()},
      {"isa", selected_isa() ? std::string(isa_name(selected_isa().value())) : "unusable"},
      {"blas", blas_core()},
      {"final_train_loss", rounded(r.last_loss, 5)},
      {"final_val_loss", r.last_val ? Json(rounded(*r.last_val, 5)) : Json(nullptr)},
      {"unigram_entropy", rounded(r.unigram, 5)},
  };
}

const char* codec_name(lh_codec codec) {
  switch (codec) {
    case LH_CODEC_NONE:
      return "none";
    case LH_CODEC_FP16:
      return "fp16";
    case LH_CODEC_BF16:
      return "bf16";
    case LH_CODEC_U8:
      return "u8";
    case LH_CODEC_U4:
      return "u4";
    case LH_CODEC_E3M0:
      return "e3m0";
    case LH_CODEC_SPARSE:
      return "sparse";
  }
  return "?";
}

// The method's settings as the peer ran them (the engine's only for its methods).
Json sync_settings(const PeerOptions& p) {
  const lh_sync_engine_options& e = p.sync;
  Json j = {
      {"codec", codec_name(e.codec)}, {"full_mesh", p.full_mesh}, {"connections", p.connections}};
  if (p.method == Method::kDataParallel) return j;
  const bool co2 = p.method == Method::kCo2;
  j["sync_every"] = e.sync_every;
  if (e.codec == LH_CODEC_SPARSE) {
    j["topk_per_chunk"] = e.topk_per_chunk;
    j["chunk"] = e.chunk;
  }
  j["fragments"] = e.fragments;
  j["delay"] = e.delay;
  j["mix"] = e.mix;
  j["outer_lr"] = co2 ? e.co2_lr : e.outer_lr;
  j["outer_momentum"] = co2 ? e.co2_momentum : e.outer_momentum;
  j["on_loss"] = e.on_loss == LH_LOSS_DROP ? "drop" : "retry";
  if (e.deadline_ms > 0) {
    j["deadline_ms"] = e.deadline_ms;
    j["adaptive_deadline"] = e.adaptive_deadline != 0;
  }
  return j;
}

}  // namespace

Result<CsvLog> CsvLog::open(const std::string& path, bool append, bool peer_columns) {
  std::ofstream out(path, append ? std::ios::app : std::ios::trunc);
  if (!out) return io_error("cannot write " + path);
  if (!append) {
    out << "step,lr,train_loss,val_loss,grad_norm,tokens_per_s,elapsed_s";
    if (peer_columns)
      out << ",world,data_sent,data_received,control_sent,control_received,state_sent,"
             "state_received,blocked_s";
    out << '\n';
  }
  return CsvLog(std::move(out), peer_columns);
}

void CsvLog::write(const CsvRow& r) {
  out_ << r.step << ',' << r.lr << ',' << r.train_loss << ','
       << (r.val_loss ? fmt::format("{}", *r.val_loss) : std::string()) << ',' << r.grad_norm << ','
       << r.tokens_per_s << ',' << r.elapsed_s;
  if (peer_ && r.peer) {
    const lh_traffic& t = r.peer->traffic;
    out_ << ',' << r.peer->world << ',' << t.data_sent << ',' << t.data_received << ','
         << t.control_sent << ',' << t.control_received << ',' << t.state_sent << ','
         << t.state_received << ',' << r.peer->blocked_s;
  }
  out_ << '\n';
}

std::string summary_json(const Options& o, const RunSummary& r, const Profile& profile) {
  Json j = run_fields(o, r);
  j["breakdown_ms_per_step"] = breakdown_json(profile, r.measured_steps > 0 ? r.measured_steps : 1);
  return j.dump();
}

std::string joined_event(std::int64_t peer_id, std::int64_t epoch, std::int64_t world,
                         std::int64_t step, std::int64_t round_every) {
  return fmt::format("JOINED id={} epoch={} world={} step={} round_every={}", peer_id, epoch, world,
                     step, round_every);
}

std::string theta_event(std::int64_t step, std::uint64_t hash, std::int64_t world,
                        std::int64_t epoch, std::uint64_t rounds) {
  return fmt::format("THETA step={} hash={:016x} world={} epoch={} rounds={}", step, hash, world,
                     epoch, rounds);
}

std::string val_event(std::int64_t step, float loss) {
  return fmt::format("VAL step={} loss={}", step, loss);
}

void print_event(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::string peer_summary_json(const Options& o, const PeerSummary& s) {
  const PeerOptions& p = o.peer;
  const lh_traffic& t = s.traffic;
  Json j = {{"mode", "peer"},       {"method", method_name(p.method)},
            {"peer_id", s.peer_id}, {"peer_index", p.peer_index},
            {"peers", p.peers},     {"world", s.world},
            {"stopped", s.stopped}};
  j.update(run_fields(o, s.run));
  j["elapsed_s"] = rounded(s.elapsed_s, 3);
  j["bytes_sent"] = {{"data", t.data_sent},
                     {"control", t.control_sent},
                     {"state", t.state_sent},
                     {"total", t.data_sent + t.control_sent + t.state_sent}};
  j["bytes_received"] = {{"data", t.data_received},
                         {"control", t.control_received},
                         {"state", t.state_received},
                         {"total", t.data_received + t.control_received + t.state_received}};
  j["peak_event_bytes"] = s.peak_event_bytes;
  j["blocked_s"] = rounded(s.blocked_s, 4);
  j["rounds_applied"] = s.rounds_applied;
  j["rounds_dropped"] = s.rounds_dropped;
  j["rounds_late"] = s.rounds_late;
  j["retries"] = s.retries;
  if (p.sync.codec == LH_CODEC_SPARSE) j["sparse_encoded_bytes"] = s.sparse_encoded_bytes;
  j["state_hash"] = fmt::format("{:016x}", s.state_hash);
  j["sync"] = sync_settings(p);
  return j.dump();
}

std::string breakdown_table(const Profile& prof, std::int64_t steps) {
  std::string out =
      fmt::format("{:<24}{:>12}{:>12}{:>8}\n", "per step (ms)", "forward", "backward", "share");
  const double total = prof.total();
  for (int i = 0; i < static_cast<int>(Phase::kCount); ++i) {
    const auto p = static_cast<Phase>(i);
    const double f = prof.seconds(p, false), b = prof.seconds(p, true);
    out += fmt::format("{:<24}{:>12.2f}{:>12.2f}{:>7.1f}%\n", phase_name(p),
                       1e3 * f / static_cast<double>(steps), 1e3 * b / static_cast<double>(steps),
                       total > 0 ? 100.0 * (f + b) / total : 0.0);
  }
  out += fmt::format("{:<24}{:>24.2f}\n", "total", 1e3 * total / static_cast<double>(steps));
  return out;
}

void plot_loss(const Options& o, const std::string& csv_path, double unigram) {
  const std::string png = o.out_dir + "/loss.png";
  const std::string cmd =
      fmt::format("python3 '{}' '{}' '{}' --unigram {}", o.plot_script, csv_path, png, unigram);
  if (std::system(cmd.c_str()) == 0) {
    std::fprintf(stderr, "wrote %s\n", png.c_str());
  } else {
    log::warn("train", "plotting failed ({}); the CSV is complete", cmd);
  }
}

}  // namespace longhaul::train::cli
