#include "sync/layout.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "quant/half.hpp"
#include "runtime/worker_pool.hpp"
#include "sync/outer_rules.hpp"

namespace longhaul::sync {
namespace {

// Pieces are copied in parallel in chunks of this many elements.
constexpr size_t kChunkElements = 1 << 16;

Status check_ranges(const std::vector<ParamRange>& ranges) {
  if (ranges.empty()) return invalid_argument("the sync engine needs at least one parameter range");
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ParamRange& r = ranges[i];
    if (r.dtype != quant::DType::kF32 && r.dtype != quant::DType::kBF16)
      return Status(LH_ERR_UNSUPPORTED,
                    fmt::format("parameter range {} is {}: the sync engine takes f32 or bf16", i,
                                quant::dtype_name(r.dtype)));
    if (r.count > 0 && !r.data)
      return invalid_argument(fmt::format("parameter range {} has no data", i));
  }
  return Status::ok();
}

std::vector<FragmentPiece> whole_ranges(const std::vector<ParamRange>& ranges, uint32_t fragments) {
  std::vector<FragmentPiece> pieces;
  for (uint32_t i = 0; i < ranges.size(); ++i)
    pieces.push_back({static_cast<uint32_t>(i % fragments), i, 0, ranges[i].count});
  return pieces;
}

// Every piece inside its range, none overlapping another.
Status check_pieces(const std::vector<ParamRange>& ranges, const std::vector<FragmentPiece>& pieces,
                    uint32_t fragments) {
  std::map<std::pair<uint32_t, size_t>, size_t> starts;  // (range, offset) -> piece index
  for (size_t i = 0; i < pieces.size(); ++i) {
    const FragmentPiece& p = pieces[i];
    if (p.fragment >= fragments)
      return invalid_argument(
          fmt::format("piece {} names fragment {} of {}", i, p.fragment, fragments));
    if (p.range >= ranges.size())
      return invalid_argument(
          fmt::format("piece {} names range {} of {}", i, p.range, ranges.size()));
    if (p.offset > ranges[p.range].count || p.count > ranges[p.range].count - p.offset)
      return invalid_argument(
          fmt::format("piece {} ([{}, {}) of range {}) exceeds the range's {} "
                      "elements",
                      i, p.offset, p.offset + p.count, p.range, ranges[p.range].count));
    if (p.count == 0) continue;
    auto [it, inserted] = starts.emplace(std::pair(p.range, p.offset), i);
    if (!inserted) return invalid_argument(fmt::format("pieces {} and {} overlap", it->second, i));
  }
  // Sorted by (range, offset): each piece must end before the next one of its range starts.
  for (auto it = starts.begin(); it != starts.end(); ++it) {
    auto next = std::next(it);
    if (next == starts.end() || next->first.first != it->first.first) continue;
    const FragmentPiece& p = pieces[it->second];
    if (p.offset + p.count > next->first.second)
      return invalid_argument(fmt::format("pieces {} and {} overlap", it->second, next->second));
  }
  return Status::ok();
}

// Runs body(piece, first, count) over every chunk of every piece of `pieces`, in parallel.
template <class Piece, class Body>
void for_each_chunk(const std::vector<Piece>& pieces, runtime::WorkerPool& workers, Body body) {
  struct Chunk {
    const Piece* piece;
    size_t first, count;
  };
  std::vector<Chunk> chunks;
  for (const Piece& p : pieces)
    for (size_t first = 0; first < p.count; first += kChunkElements)
      chunks.push_back({&p, first, std::min(kChunkElements, p.count - first)});
  workers.parallel_for(chunks.size(),
                       [&](size_t i) { body(*chunks[i].piece, chunks[i].first, chunks[i].count); });
}

}  // namespace

Result<Layout> Layout::make(std::vector<ParamRange> ranges, std::vector<FragmentPiece> pieces,
                            uint32_t fragments, std::shared_ptr<DeviceCopies> device) {
  if (fragments == 0) return invalid_argument("a layout needs at least one fragment");
  LH_RETURN_IF_ERROR(check_ranges(ranges));
  if (pieces.empty()) pieces = whole_ranges(ranges, fragments);
  LH_RETURN_IF_ERROR(check_pieces(ranges, pieces, fragments));
  Layout layout;
  layout.fragment_pieces_.resize(fragments);
  layout.fragment_sizes_.assign(fragments, 0);
  for (const FragmentPiece& p : pieces) {
    if (p.count == 0) continue;
    size_t& size = layout.fragment_sizes_[p.fragment];
    layout.fragment_pieces_[p.fragment].push_back(
        {ranges[p.range], p.range, p.offset, p.count, size});
    size += p.count;
  }
  for (uint32_t f = 0; f < fragments; ++f)
    if (layout.fragment_sizes_[f] == 0)
      return invalid_argument(fmt::format("fragment {} holds no parameter", f));
  LH_RETURN_IF_ERROR(layout.place_device_pieces(std::move(device)));
  return layout;
}

// Gives every device piece its place in one host mirror, which the fragments share (the engine
// works on one fragment at a time): a fragment's device pieces one after another, each cache-line
// aligned. Then takes the mirror and points the pieces there.
Status Layout::place_device_pieces(std::shared_ptr<DeviceCopies> device) {
  struct Place {
    size_t fragment;
    Piece* piece;
    size_t at;  // bytes into the mirror
  };
  std::vector<Place> places;
  for (size_t f = 0; f < fragment_pieces_.size(); ++f) {
    size_t used = 0;
    for (Piece& p : fragment_pieces_[f]) {
      if (!p.range.on_device) continue;
      places.push_back({f, &p, used});
      used = (used + p.count * quant::element_size(p.range.dtype) + 63) & ~size_t{63};
      mirror_bytes_ = std::max(mirror_bytes_, used);
    }
  }
  if (places.empty()) return Status::ok();
  if (!device)
    return invalid_argument("parameter ranges in device memory need the GPU layer's copies");
  auto mirror = device->host_buffer(mirror_bytes_);
  if (!mirror) return mirror.status();
  mirror_ = std::move(*mirror);
  device_ = std::move(device);
  transfers_.resize(fragment_pieces_.size());
  for (const Place& place : places) {
    Piece& p = *place.piece;
    const size_t element = quant::element_size(p.range.dtype);
    std::byte* host = mirror_.get() + place.at;
    transfers_[place.fragment].push_back(
        {p.range_index, static_cast<std::byte*>(p.range.data) + p.offset * element, host,
         p.count * element});
    p.range = {host, p.count, p.range.dtype, /*on_device=*/false};
    p.offset = 0;
  }
  return Status::ok();
}

Status Layout::stage(size_t f, bool to_device) const {
  if (transfers_.empty()) return Status::ok();
  for (const Transfer& t : transfers_[f]) {
    const Status s = to_device ? device_->to_device(t.device, t.host, t.bytes)
                               : device_->to_host(t.host, t.device, t.bytes);
    if (!s)
      return Status(s.code(), fmt::format("copying parameter range {} {} the device: {}", t.range,
                                          to_device ? "to" : "from", s.message()));
  }
  return Status::ok();
}

size_t Layout::largest_fragment() const {
  return *std::max_element(fragment_sizes_.begin(), fragment_sizes_.end());
}

size_t Layout::total_elements() const {
  size_t total = 0;
  for (size_t s : fragment_sizes_) total += s;
  return total;
}

Status Layout::update(size_t f, const ChunkBody& body, runtime::WorkerPool& workers,
                      bool write_back) const {
  LH_RETURN_IF_ERROR(stage(f, /*to_device=*/false));
  run_chunks(f, body, workers, write_back);
  return write_back ? stage(f, /*to_device=*/true) : Status::ok();
}

Status Layout::overwrite(size_t f, const ChunkBody& body, runtime::WorkerPool& workers) const {
  run_chunks(f, body, workers, /*write_back=*/true);
  return stage(f, /*to_device=*/true);
}

void Layout::run_chunks(size_t f, const ChunkBody& body, runtime::WorkerPool& workers,
                        bool write_back) const {
  for_each_chunk(fragment_pieces_[f], workers, [&](const Piece& p, size_t first, size_t count) {
    const size_t position = p.position + first;
    if (p.range.dtype == quant::DType::kF32) {
      body(position, {static_cast<float*>(p.range.data) + p.offset + first, count});
      return;
    }
    uint16_t* local = static_cast<uint16_t*>(p.range.data) + p.offset + first;
    thread_local std::vector<float> values;
    values.resize(count);
    for (size_t i = 0; i < count; ++i) values[i] = quant::bf16_to_f32(local[i]);
    body(position, values);
    if (write_back)
      for (size_t i = 0; i < count; ++i) local[i] = quant::f32_to_bf16(values[i]);
  });
}

Status Layout::read(size_t f, std::span<float> out, runtime::WorkerPool& workers) const {
  return update(
      f,
      [&](size_t position, std::span<float> values) {
        std::copy(values.begin(), values.end(),
                  out.begin() + static_cast<std::ptrdiff_t>(position));
      },
      workers, /*write_back=*/false);
}

Status Layout::merge(size_t f, std::span<const float> global, float alpha,
                     runtime::WorkerPool& workers) const {
  const auto body = [&](size_t position, std::span<float> values) {
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = mix(values[i], global[position + i], alpha);
  };
  // α = 0 sets θ_local to θ_g without reading it: device pieces need no copy in.
  return alpha == 0.0f ? overwrite(f, body, workers) : update(f, body, workers);
}

}  // namespace longhaul::sync
