// The local group's steps over its shared segment: reduce-scatter, all-gather and agreement, each
// a sequence of rounds of post, barrier, read, barrier (shm_local_group.hpp).
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "collective/partition.hpp"
#include "node/shm_layout.hpp"
#include "quant/reduce.hpp"

namespace longhaul::node {

namespace {

collective::Partition chunks_of(size_t count, uint32_t ranks) {
  return collective::Partition(count, ranks, std::max<size_t>(count, 1));
}

// How many rounds move a chunk of `largest` elements, `per_round` at a time.
size_t rounds_for(size_t largest, size_t per_round) {
  return (largest + per_round - 1) / per_round;
}

// The piece of `chunk` a round moves: [first, first + n) within the chunk, n possibly 0.
struct Piece {
  size_t first = 0;
  size_t n = 0;
};
Piece piece_of(const collective::Range& chunk, size_t round, size_t per_round) {
  const size_t first = round * per_round;
  if (first >= chunk.count) return {};
  return {first, std::min(per_round, chunk.count - first)};
}

bool sums(quant::ReduceOp op) {
  return op == quant::ReduceOp::kSum || op == quant::ReduceOp::kAvg;
}

}  // namespace

ShmHeader& ShmLocalGroup::header() const {
  return *reinterpret_cast<ShmHeader*>(segment_.data());
}

std::byte* ShmLocalGroup::slot(uint32_t rank) const {
  return segment_.data() + kHeaderBytes + rank * header().slot_bytes;
}

size_t ShmLocalGroup::piece_bytes() const {
  return header().slot_bytes / options_.size / kPieceAlign * kPieceAlign;
}

std::byte* ShmLocalGroup::piece_slot(uint32_t rank, uint32_t owner) const {
  return slot(rank) + owner * piece_bytes();
}

Status ShmLocalGroup::reduce_scatter(const void* input, void* shard, size_t count,
                                     quant::DType dtype, quant::ReduceOp op) {
  // A failure of this rank's own (its arguments) must not leave the siblings waiting for it.
  if (Status s = quant::check_supported(dtype, op); !s) return abort_with(s);
  const size_t es = quant::element_size(dtype);
  const auto chunks = chunks_of(count, options_.size);
  const collective::Range mine = chunks.chunk(options_.rank);
  if ((count > 0 && !input) || (mine.count > 0 && !shard))
    return abort_with(invalid_argument("local reduce-scatter: NULL buffer"));
  const size_t per_round = piece_bytes() / es;
  const auto* in = static_cast<const std::byte*>(input);
  for (size_t round = 0; round < rounds_for(chunks.chunk(0).count, per_round); ++round) {
    for (uint32_t owner = 0; owner < options_.size; ++owner) {
      const auto chunk = chunks.chunk(owner);
      const Piece p = piece_of(chunk, round, per_round);
      if (p.n)
        std::memcpy(piece_slot(options_.rank, owner), in + (chunk.begin + p.first) * es, p.n * es);
    }
    if (Status s = barrier_->arrive_and_wait("local reduce-scatter: contributions posted"); !s)
      return s;
    const Piece p = piece_of(mine, round, per_round);
    if (p.n) {
      if (Status s = reduce_piece(static_cast<std::byte*>(shard) + p.first * es, p.n, dtype, op);
          !s)
        return abort_with(s);
    }
    if (Status s = barrier_->arrive_and_wait("local reduce-scatter: contributions read"); !s)
      return s;
  }
  return Status::ok();
}

Status ShmLocalGroup::reduce_piece(void* dst, size_t n, quant::DType dtype,
                                   quant::ReduceOp op) const {
  const size_t es = quant::element_size(dtype);
  std::memcpy(dst, piece_slot(0, options_.rank), n * es);
  if (options_.size == 1) return Status::ok();
  const bool half = dtype == quant::DType::kF16 || dtype == quant::DType::kBF16;
  if (half && sums(op)) {  // round once, as the direct schedule's owner does
    std::vector<const void*> sources;
    for (uint32_t r = 1; r < options_.size; ++r) sources.push_back(piece_slot(r, options_.rank));
    return quant::sum_widened(dst, sources, n, dtype, 1);
  }
  const auto combine = op == quant::ReduceOp::kAvg ? quant::ReduceOp::kSum : op;
  for (uint32_t r = 1; r < options_.size; ++r)
    if (Status s = quant::reduce_into(dst, piece_slot(r, options_.rank), n, dtype, combine); !s)
      return s;
  return Status::ok();
}

Status ShmLocalGroup::all_gather(const void* shard, void* output, size_t count,
                                 quant::DType dtype) {
  const size_t es = quant::element_size(dtype);
  const auto chunks = chunks_of(count, options_.size);
  if ((count > 0 && !output) || (chunks.chunk(options_.rank).count > 0 && !shard))
    return abort_with(invalid_argument("local all-gather: NULL buffer"));
  const size_t per_round = header().slot_bytes / es;
  const auto* mine = static_cast<const std::byte*>(shard);
  auto* out = static_cast<std::byte*>(output);
  for (size_t round = 0; round < rounds_for(chunks.chunk(0).count, per_round); ++round) {
    const auto own = chunks.chunk(options_.rank);
    if (const Piece p = piece_of(own, round, per_round); p.n)
      std::memcpy(slot(options_.rank), mine + p.first * es, p.n * es);
    if (Status s = barrier_->arrive_and_wait("local all-gather: shards posted"); !s) return s;
    for (uint32_t r = 0; r < options_.size; ++r) {
      const auto chunk = chunks.chunk(r);
      const Piece p = piece_of(chunk, round, per_round);
      std::byte* to = out + (chunk.begin + p.first) * es;
      if (p.n && to != mine + p.first * es) std::memcpy(to, slot(r), p.n * es);
    }
    if (Status s = barrier_->arrive_and_wait("local all-gather: shards read"); !s) return s;
  }
  return Status::ok();
}

Status ShmLocalGroup::agree(const Status& mine) {
  SharedOutcome& own = header().outcomes[options_.rank];
  own.code = static_cast<int32_t>(mine.code());
  const size_t n = std::min(mine.message().size(), sizeof own.message - 1);
  std::memcpy(own.message, mine.message().data(), n);
  own.message[n] = '\0';
  // No deadline: a sibling may still be in its rail's all-reduce, which has bounds of its own.
  if (Status s =
          barrier_->arrive_and_wait("agreeing on the outcome", SharedBarrier::Deadline::kNone);
      !s)
    return s;
  Status all;
  for (uint32_t r = 0; r < options_.size && all.is_ok(); ++r) {
    const SharedOutcome& o = header().outcomes[r];
    if (o.code != LH_OK)
      all = Status(static_cast<lh_status>(o.code), fmt::format("local rank {}: {}", r, o.message));
  }
  // Nobody may write the next outcome before everyone has read this one.
  if (Status s = barrier_->arrive_and_wait("outcome read", SharedBarrier::Deadline::kNone); !s)
    return s;
  return all;
}

}  // namespace longhaul::node
