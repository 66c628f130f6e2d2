// How an all-reduce's segments travel: in the data type itself (plain) or quantized by a codec
// (encoded). The schedules call the same five steps for both; each format has one code path.
//
//   contribution  this member's own values of a segment, ready to send
//   reduce        combine what arrived into the segment's working values
//   partial       the working values, ready to send on (the ring's partial sums)
//   finish        the owner's final bytes of a segment: what every member ends with
//   landing/adopt where another owner's final bytes land, and making them the output
//
// Bit parity lives here: every combination happens in one fixed order chosen by the schedule, and
// with a codec the owner encodes its final segment once and every member, the owner included,
// ends with the decoding of those same bytes.
//
// Threads: a segment is worked on by one thread at a time (the schedules order its steps); steps
// on different segments run concurrently.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>

#include "collective/allreduce_spec.hpp"
#include "collective/input_guard.hpp"
#include "collective/step_plan.hpp"
#include "common/status.hpp"

namespace longhaul::collective {

class WireFormat {
 public:
  using FailureSink = std::function<void(Status)>;
  // `fail` receives a kernel's error: the operation fails with it.
  WireFormat(const AllReduceSpec& spec, const StepPlan& plan, InputGuard& guard, FailureSink fail)
      : spec_(spec), plan_(plan), guard_(guard), fail_(std::move(fail)) {}
  virtual ~WireFormat() = default;

  // The scratch arena (StepPlan's layout); set before the first step.
  void set_arena(std::byte* arena) { arena_ = arena; }
  // Where the working values live: spec.output unless set (a reduce-scatter's scratch).
  void set_work(void* work) { work_ = static_cast<std::byte*>(work); }

  // This member's values of the segment, ready to send: the first touch of the output segment,
  // then (encoded) its encoding, with error feedback, in slot kOut/lane. Ring step 0, direct
  // scatter.
  virtual std::span<const std::byte> contribution(size_t chunk, size_t seg, size_t lane) = 0;
  // Combines `incoming` (each holding the segment's wire bytes, combined in this order) into the
  // segment's working values. `finish`: these were the last contributions (plain averages here,
  // in the same pass over memory).
  virtual void reduce(size_t chunk, size_t seg, std::span<const std::byte* const> incoming,
                      bool finish) = 0;
  // The working values, ready to send on (encoded: re-encoded into slot kOut/lane).
  virtual std::span<const std::byte> partial(size_t chunk, size_t seg, size_t lane) = 0;
  // After reduce(..., finish = true) on the owner: the segment's final bytes, which every member
  // ends with; the owner's own output holds their value.
  virtual std::span<const std::byte> finish(size_t chunk, size_t seg) = 0;
  // Where another owner's final bytes of the segment land.
  virtual std::span<std::byte> landing(size_t chunk, size_t seg, size_t lane) = 0;
  // Whether landed bytes already are the output (plain); else adopt() must decode them.
  virtual bool lands_in_output() const = 0;
  // Makes the landed final bytes the segment's output values.
  virtual void adopt(size_t chunk, size_t seg, size_t lane) = 0;
  // After reduce(..., finish = true) on the owner in a reduce-scatter: the working values become
  // final where they are (averaged, not encoded: nobody else receives them).
  virtual void keep(size_t chunk, size_t seg) = 0;

 protected:
  void check(Status s) const {
    if (!s) fail_(s.with_context("all-reduce"));
  }
  std::byte* work(size_t chunk, size_t seg) const {
    return work_ + plan_.segment(chunk, seg).begin * plan_.element_size();
  }
  std::span<std::byte> work_span(size_t chunk, size_t seg) const {
    return {work(chunk, seg), plan_.bytes(chunk, seg)};
  }
  std::span<float> work_f32(size_t chunk, size_t seg) const {
    return {reinterpret_cast<float*>(work(chunk, seg)), plan_.segment(chunk, seg).count};
  }
  std::span<std::byte> slot(StepPlan::Slot role, size_t lane, size_t chunk, size_t seg) const {
    return plan_.slot(arena_, role, lane, chunk, seg);
  }

  const AllReduceSpec& spec_;
  const StepPlan& plan_;
  InputGuard& guard_;

 private:
  FailureSink fail_;
  std::byte* arena_ = nullptr;
  std::byte* work_ = static_cast<std::byte*>(spec_.output);
};

// The format for spec.codec: plain for kNone, else encoded.
std::unique_ptr<WireFormat> make_wire_format(const AllReduceSpec& spec, const StepPlan& plan,
                                             InputGuard& guard, WireFormat::FailureSink fail);
std::unique_ptr<WireFormat> make_plain_format(const AllReduceSpec& spec, const StepPlan& plan,
                                              InputGuard& guard, WireFormat::FailureSink fail);
std::unique_ptr<WireFormat> make_encoded_format(const AllReduceSpec& spec, const StepPlan& plan,
                                                InputGuard& guard, WireFormat::FailureSink fail);

}  // namespace longhaul::collective
