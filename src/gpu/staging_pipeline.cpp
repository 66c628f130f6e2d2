#include "gpu/staging_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/log.hpp"

namespace longhaul::gpu {

std::shared_ptr<StagingPipeline> StagingPipeline::create(std::shared_ptr<CopyEngine> engine,
                                                         PipelineBuffers buffers,
                                                         std::function<Status()> land_whole) {
  return std::shared_ptr<StagingPipeline>(
      new StagingPipeline(std::move(engine), buffers, std::move(land_whole)));
}

StagingPipeline::StagingPipeline(std::shared_ptr<CopyEngine> engine, PipelineBuffers buffers,
                                 std::function<Status()> land_whole)
    : engine_(std::move(engine)), buffers_(buffers), land_whole_(std::move(land_whole)) {}

void StagingPipeline::begin(const collective::InputPlan& input, CopyStarted copy_started) {
  // Asked once: for the CUDA engine, each is a query of the runtime.
  const bool encodes_input = buffers_.source != nullptr && !input.send_only_chunks.empty() &&
                             engine_->runs_codec(input.codec, buffers_.source);
  const bool decodes_output =
      buffers_.destination != nullptr && engine_->runs_codec(input.codec, buffers_.destination);
  std::vector<std::pair<size_t, Segment>> copies;  // (segment index, segment) in order
  {
    MutexLock lock(mu_);
    copy_started_ = copy_started;
    codec_ = input.codec;
    block_ = input.block;
    decodes_output_ = decodes_output;
    segments_per_chunk_ = input.part.segments();
    segments_.assign(input.part.members() * segments_per_chunk_, Segment{});
    for (size_t chunk = 0; chunk < input.part.members(); ++chunk)
      for (size_t seg = 0; seg < segments_per_chunk_; ++seg) {
        Segment& s = segments_[chunk * segments_per_chunk_ + seg];
        s.range = input.part.segment(chunk, seg);
        s.arrived = true;  // unless the schedule reads it (below)
      }
    for (size_t chunk : input.chunk_order) {
      const bool send_only =
          std::ranges::find(input.send_only_chunks, chunk) != input.send_only_chunks.end();
      for (size_t seg = 0; seg < segments_per_chunk_; ++seg) {
        const size_t index = chunk * segments_per_chunk_ + seg;
        Segment& s = segments_[index];
        s.arrived = buffers_.source == nullptr || s.range.count == 0;
        if (s.arrived) continue;
        if (send_only && encodes_input) s.encoded_bytes = encoded_arrival(input, s.range.count);
        copies.emplace_back(index, s);
      }
    }
  }
  for (const auto& [index, segment] : copies)
    start_input_copy(index, segment, input, copy_started ? copy_started() : CopyEnded{});
}

size_t StagingPipeline::encoded_arrival(const collective::InputPlan& input, size_t count) const {
  auto bytes = quant::encoded_size(count, input.codec, input.block);
  return bytes && *bytes <= count * buffers_.element_size ? *bytes : 0;
}

void StagingPipeline::when_input_ready(size_t chunk, size_t seg, Ready ready) {
  Status how;
  {
    MutexLock lock(mu_);
    const size_t index = chunk * segments_per_chunk_ + seg;
    if (index >= segments_.size()) {
      how =
          Status(LH_ERR_INTERNAL, "staging: an input segment asked for before the schedule began");
    } else if (!segments_[index].arrived) {
      segments_[index].waiters.push_back(std::move(ready));
      return;
    } else {
      how = segments_[index].failure;
    }
  }
  ready(how);
}

std::span<const std::byte> StagingPipeline::encoded_input(size_t chunk, size_t seg) const {
  MutexLock lock(mu_);
  const size_t index = chunk * segments_per_chunk_ + seg;
  if (index >= segments_.size() || segments_[index].encoded_bytes == 0) return {};
  const Segment& s = segments_[index];
  return {slot_at(s.range), s.encoded_bytes};
}

Status StagingPipeline::load_all() {
  const size_t first = buffers_.source_first * buffers_.element_size;
  const size_t bytes = buffers_.source_count * buffers_.element_size;
  if (buffers_.source != nullptr && bytes > 0) {
    {
      MutexLock lock(mu_);
      ++in_flight_;
      ++counts_.input;
      counts_.input_bytes += bytes;
    }
    engine_->copy(buffers_.slot + first, buffers_.source, bytes,
                  [self = shared_from_this()](Status s) {
                    MutexLock lock(self->mu_);
                    self->copy_done(s);
                  });
  }
  return wait_all();
}

void StagingPipeline::result_final(size_t chunk, size_t seg, std::span<const std::byte> encoded) {
  if (buffers_.destination == nullptr) return;
  size_t index = 0;
  collective::Range range;
  {
    MutexLock lock(mu_);
    index = chunk * segments_per_chunk_ + seg;
    const Segment& s = segments_[index];
    if (s.moved_out || s.range.count == 0) return;
    range = s.range;
    // Moved encoded only where that is fewer bytes (a codec's headers outweigh a tiny tail), and
    // only while the operation runs. A landing after success moves the values (the operation's
    // buffer holds them, decoded) in one copy: decoding there took a copy and a kernel per
    // segment, as long as that one copy with the GPU to itself and over ten times as long where
    // another process's landing shared it (docs/gpu.md, gpu-run16).
    if (!decodes_output_ || buffers_.destination_after_success ||
        encoded.size() >= range.count * buffers_.element_size)
      encoded = {};
  }
  if (!encoded.empty()) {
    // The final bytes lie in the operation's scratch, which is pageable: a copy from there could
    // block this thread on the copy stream. The segment's own place in the pinned slot is free
    // (its values go to the destination as these bytes), and they fit there.
    std::memcpy(slot_at(range), encoded.data(), encoded.size());
    encoded = {slot_at(range), encoded.size()};
  }
  OutputCopy out;
  CopyStarted started;
  {
    MutexLock lock(mu_);
    Segment& s = segments_[index];
    s.final_encoded = encoded;
    if (buffers_.destination_after_success) return;  // land() writes it
    s.moved_out = true;
    out = {s.range, s.final_encoded};
    ++counts_.output_overlapped;
    started = copy_started_;
  }
  start_output_copy(out.range, out.encoded, started ? started() : CopyEnded{});
}

Status StagingPipeline::land() {
  const auto started = std::chrono::steady_clock::now();
  LH_RETURN_IF_ERROR(wait_all());
  if (buffers_.destination == nullptr) return land_whole_ ? land_whole_() : Status::ok();
  std::vector<OutputCopy> rest;
  {
    MutexLock lock(mu_);
    rest = unwritten_segments();
    counts_.output_at_land += rest.size();
  }
  for (const OutputCopy& c : rest) start_output_copy(c.range, c.encoded, {});
  Status landed = wait_all();
  log::debug("gpu", "staging: {} copies at the landing, {:.1f} ms", rest.size(),
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                 .count());
  return landed;
}

std::vector<StagingPipeline::OutputCopy> StagingPipeline::unwritten_segments() {
  std::vector<OutputCopy> rest;
  // A group of one: the schedule cut nothing.
  if (segments_.empty()) rest.push_back({{0, buffers_.bytes / buffers_.element_size}, {}});
  // Chunk by chunk, each chunk's segments in turn: adjacent segments merge where one begins where
  // the previous ends.
  for (Segment& s : segments_) {
    if (s.moved_out || s.range.count == 0) continue;
    s.moved_out = true;
    const bool joins_previous = !rest.empty() && rest.back().encoded.empty() &&
                                s.final_encoded.empty() &&
                                rest.back().range.begin + rest.back().range.count == s.range.begin;
    if (joins_previous)
      rest.back().range.count += s.range.count;
    else
      rest.push_back({s.range, s.final_encoded});
  }
  return rest;
}

StagingPipeline::Counts StagingPipeline::counts() const {
  MutexLock lock(mu_);
  return counts_;
}

void StagingPipeline::start_input_copy(size_t index, const Segment& s,
                                       const collective::InputPlan& input, CopyEnded ended) {
  const size_t bytes =
      s.encoded_bytes > 0 ? s.encoded_bytes : s.range.count * buffers_.element_size;
  {
    MutexLock lock(mu_);
    ++in_flight_;
    ++counts_.input;
    counts_.input_bytes += bytes;
    if (s.encoded_bytes > 0) ++counts_.input_encoded;
  }
  auto arrived = [self = shared_from_this(), index, ended = std::move(ended)](Status how) {
    self->input_arrived(index, how);
    if (ended) ended(how);
  };
  const std::byte* from = static_cast<const std::byte*>(buffers_.source) +
                          (s.range.begin - buffers_.source_first) * buffers_.element_size;
  if (s.encoded_bytes > 0)
    engine_->encode_copy(slot_at(s.range), reinterpret_cast<const float*>(from), s.range.count,
                         input.codec, input.block, std::move(arrived));
  else
    engine_->copy(slot_at(s.range), from, bytes, std::move(arrived));
}

void StagingPipeline::start_output_copy(const collective::Range& r,
                                        std::span<const std::byte> encoded, CopyEnded ended) {
  quant::Codec codec;
  size_t block;
  {
    MutexLock lock(mu_);
    ++in_flight_;
    counts_.output_bytes += encoded.empty() ? r.count * buffers_.element_size : encoded.size();
    if (!encoded.empty()) ++counts_.output_decoded;
    codec = codec_;
    block = block_;
  }
  auto moved = [self = shared_from_this(), ended = std::move(ended)](Status how) {
    {
      MutexLock lock(self->mu_);
      self->copy_done(how);
    }
    if (ended) ended(how);
  };
  if (encoded.empty())
    engine_->copy(destination_at(r), slot_at(r), r.count * buffers_.element_size, std::move(moved));
  else
    engine_->decode_copy(destination_at(r), encoded.data(), r.count, codec, block,
                         std::move(moved));
}

void StagingPipeline::input_arrived(size_t index, const Status& how) {
  std::vector<Ready> waiters;
  {
    MutexLock lock(mu_);
    Segment& s = segments_[index];
    s.arrived = true;
    s.failure = how;
    waiters.swap(s.waiters);
    copy_done(how);
  }
  for (Ready& ready : waiters) ready(how);
}

void StagingPipeline::copy_done(const Status& how) {
  --in_flight_;
  if (!how && first_failure_.is_ok()) first_failure_ = how;
  if (in_flight_ == 0) idle_.notify_all();
}

Status StagingPipeline::wait_all() {
  {
    MutexLock lock(mu_);
    while (in_flight_ > 0) idle_.wait(mu_);
    if (!first_failure_.is_ok()) return first_failure_;
  }
  return engine_->settle();
}

std::byte* StagingPipeline::slot_at(const collective::Range& r) const {
  return buffers_.slot + r.begin * buffers_.element_size;
}

void* StagingPipeline::destination_at(const collective::Range& r) const {
  return static_cast<std::byte*>(buffers_.destination) + r.begin * buffers_.element_size;
}

}  // namespace longhaul::gpu
