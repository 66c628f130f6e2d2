#include "gpu/staging_pipeline.hpp"

#include <utility>

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

void StagingPipeline::begin(const collective::Partition& part, std::span<const size_t> chunk_order,
                            CopyStarted copy_started) {
  std::vector<std::pair<size_t, collective::Range>> copies;  // (segment index, range) in order
  {
    MutexLock lock(mu_);
    copy_started_ = copy_started;
    segments_per_chunk_ = part.segments();
    segments_.assign(part.members() * segments_per_chunk_, Segment{});
    for (size_t chunk : chunk_order)
      for (size_t seg = 0; seg < segments_per_chunk_; ++seg) {
        const size_t index = chunk * segments_per_chunk_ + seg;
        Segment& s = segments_[index];
        s.range = part.segment(chunk, seg);
        s.arrived = buffers_.source == nullptr || s.range.count == 0;
        if (!s.arrived) copies.emplace_back(index, s.range);
      }
  }
  for (const auto& [index, range] : copies)
    start_input_copy(index, range, copy_started ? copy_started() : CopyEnded{});
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

Status StagingPipeline::load_all() {
  if (buffers_.source != nullptr && buffers_.bytes > 0) {
    {
      MutexLock lock(mu_);
      ++in_flight_;
      ++counts_.input;
    }
    engine_->copy(buffers_.slot, buffers_.source, buffers_.bytes,
                  [self = shared_from_this()](Status s) {
                    MutexLock lock(self->mu_);
                    self->copy_done(s);
                  });
  }
  return wait_all();
}

void StagingPipeline::result_final(size_t chunk, size_t seg) {
  if (buffers_.destination == nullptr) return;
  collective::Range range;
  CopyStarted started;
  {
    MutexLock lock(mu_);
    Segment& s = segments_[chunk * segments_per_chunk_ + seg];
    if (s.moved_out || s.range.count == 0) return;
    s.moved_out = true;
    range = s.range;
    ++counts_.output_overlapped;
    started = copy_started_;
  }
  start_output_copy(range, started ? started() : CopyEnded{});
}

Status StagingPipeline::land() {
  LH_RETURN_IF_ERROR(wait_all());
  if (buffers_.destination == nullptr) return land_whole_ ? land_whole_() : Status::ok();
  // Segments the schedule never reported final (a group of one reports none) go now.
  std::vector<collective::Range> rest;
  {
    MutexLock lock(mu_);
    if (segments_.empty()) rest.push_back({0, buffers_.bytes / buffers_.element_size});
    for (Segment& s : segments_)
      if (!s.moved_out && s.range.count > 0) {
        s.moved_out = true;
        rest.push_back(s.range);
      }
    counts_.output_at_land += rest.size();
  }
  for (const collective::Range& r : rest) start_output_copy(r, {});
  return wait_all();
}

StagingPipeline::Counts StagingPipeline::counts() const {
  MutexLock lock(mu_);
  return counts_;
}

void StagingPipeline::start_input_copy(size_t index, const collective::Range& r, CopyEnded ended) {
  {
    MutexLock lock(mu_);
    ++in_flight_;
    ++counts_.input;
  }
  const size_t offset = r.begin * buffers_.element_size;
  engine_->copy(slot_at(r), static_cast<const std::byte*>(buffers_.source) + offset,
                r.count * buffers_.element_size,
                [self = shared_from_this(), index, ended = std::move(ended)](Status s) {
                  self->input_arrived(index, s);
                  if (ended) ended(s);
                });
}

void StagingPipeline::start_output_copy(const collective::Range& r, CopyEnded ended) {
  {
    MutexLock lock(mu_);
    ++in_flight_;
  }
  engine_->copy(destination_at(r), slot_at(r), r.count * buffers_.element_size,
                [self = shared_from_this(), ended = std::move(ended)](Status s) {
                  {
                    MutexLock lock(self->mu_);
                    self->copy_done(s);
                  }
                  if (ended) ended(s);
                });
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
