// How a sync engine trains: the parameters, the fragment schedule, the outer loop and its
// hyperparameters, the wire codec, and what to do when a peer is lost. Every peer of the group
// must use the same values (the shared state's configuration tag enforces it).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "quant/codec.hpp"
#include "quant/sparse_codec.hpp"
#include "sync/layout.hpp"
#include "sync/outer_rules.hpp"

namespace longhaul::sync {

// DiLoCo and Streaming DiLoCo: Nesterov on the fresh average, applied τ steps after the launch.
// CO2 and eager overlap a round's all-reduce with the whole next round and apply it one round
// later (CO2: heavy-ball momentum with its staleness gap penalty and momentum clipping; eager:
// the delayed average plus the peer's own fresh pseudo-gradient in place of its stale one).
enum class Method : uint8_t { kDiLoCo = 0, kCo2 = 1, kEager = 2 };
const char* method_name(Method m);

// A round whose all-reduce fails (a peer lost): retry it over the survivors with a fresh
// pseudo-gradient, or drop it (no outer update for that fragment this round). CO2 and eager
// always drop: their pseudo-gradient was formed a whole round ago and cannot be formed again.
enum class LossPolicy : uint8_t { kRetry = 0, kDrop = 1 };

struct SparseOptions {
  bool enabled = false;
  // k: values sent per chunk at most, >= 1; and elements per chunk, 1..65535.
  uint32_t topk_per_chunk = static_cast<uint32_t>(quant::sparse::kDefaultTopk);
  uint32_t chunk = static_cast<uint32_t>(quant::sparse::kDefaultChunk);
};

struct EngineOptions {
  std::vector<ParamRange> ranges;
  std::vector<FragmentPiece> pieces;  // empty: range i in fragment i mod fragments
  uint32_t fragments = 1;             // F
  uint32_t sync_every = 100;          // H
  uint32_t delay = 0;                 // τ (DiLoCo method only; CO2 and eager need 0); with
                                      // adaptive_delay: the first cycle's τ
  // Adaptive overlap (docs/overlap.md): from the second cycle of H steps on, τ is the fewest
  // steps that cover the slowest member's measured sync time plus `overlap_margin`, within
  // [1, min(max_staleness_steps, the schedule's bound)]. DiLoCo method only (CO2 and eager
  // already overlap a whole round). Default off: τ then follows the network's timing, so two runs
  // of one seed no longer give the same θ_g, and a DiLoCo run configured blocking (τ = 0) would
  // turn into Streaming DiLoCo; a trainer opts in.
  bool adaptive_delay = false;
  // The most inner steps a round may stay in flight when τ is adaptive. Default 5: a 4-peer ring
  // sync of a 1.6 MB f32 fragment over 50 ms one-way paths at 100 Mbit/s takes about 0.5 s,
  // 5 steps of 0.1 s (docs/training.md's WAN lab), while 5 of H = 50 steps keep the overlap at a
  // tenth of a round.
  uint32_t max_staleness_steps = 5;
  float overlap_margin = 0.2f;  // the fraction of the sync time τ covers beyond it
  Method method = Method::kDiLoCo;
  NesterovParams nesterov;  // DiLoCo: lr 0.7, momentum 0.9
  Co2Params co2;
  float mix = 0.0f;  // α of the merge θ_local ← α θ_local + (1 − α) θ_g
  quant::Codec codec = quant::Codec::kNone;
  uint32_t block = 128;
  // The sparse codec instead of `codec`'s all-reduce (docs/training.md, "Sparse
  // pseudo-gradients"): each member sends the top `topk_per_chunk` of every `chunk` values of its
  // pseudo-gradient, 2 bits each, with error feedback (quant/sparse_codec.hpp), through the sparse
  // all-gather, and every member sums the accepted encodings in ring order. DiLoCo method only
  // (Streaming DiLoCo included); `codec` must stay kNone.
  SparseOptions sparse;
  LossPolicy on_loss = LossPolicy::kRetry;
  uint32_t max_attempts = 3;              // with kRetry: tries of one round
  std::chrono::milliseconds deadline{0};  // 0: none; else a round not done this long after its
                                          // launch is dropped (and counted as late)
  // The deadline follows the group (round_deadline.hpp, docs/training.md "Settling a round"):
  // each round's is clamp(median + max(4 · MAD, median / 2), 1 s, `deadline`) over the fastest
  // member's sync time of each of the last 16 applied rounds; `deadline` (> 0) is the cap and the
  // deadline of the rounds before 4 were measured. Default off: the deadline stays the one the
  // user chose. Like `deadline`, this peer's own: not part of the configuration tag.
  bool adaptive_deadline = false;
  uint32_t verify_every = 0;  // 0: shared state synced when members join; k: also at every k-th
                              // admission point (a hash check, no bytes in steady state)
  std::string resume_path;    // empty: a fresh start; else the engine checkpoint to resume from
  // How ranges with on_device reach the host (the C API hands in the GPU layer's); not part of
  // the configuration the group must agree on: GPU and CPU peers train together.
  std::shared_ptr<DeviceCopies> device_copies;
};

// Checks everything that does not need the network. LH_ERR_INVALID_ARGUMENT or
// LH_ERR_UNSUPPORTED with the reason.
Status validate(const EngineOptions& options);

// The sparse codec's parameters of `o` (the decay is the codec's default, docs/quantization.md).
quant::sparse::Params sparse_params(const SparseOptions& o);

// The configuration tag (SharedState) of `options` over `layout`.
std::string config_tag(const EngineOptions& options, const Layout& layout);

}  // namespace longhaul::sync
