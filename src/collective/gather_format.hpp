// How a gathering operation's segments travel: in the data type itself (plain) or encoded once by
// their owner (a quantizing codec, f32 data). The schedules call the same three steps for both:
//
//   own      this member's contribution of a segment, at its place in the output, ready to send
//   landing  where another member's bytes of a segment land
//   adopt    making landed bytes the segment's output values
//
// Bit parity: a contribution's bytes are made once, by their owner, and passed on unchanged;
// encoded, the owner adopts the decoding of its own encoding too, so every member ends with the
// same values.
//
// Threads: a segment is worked on by one thread at a time; different segments concurrently.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "collective/gather_plan.hpp"
#include "collective/input_guard.hpp"
#include "common/status.hpp"

namespace longhaul::collective {

class GatherFormat {
 public:
  using FailureSink = std::function<void(Status)>;
  GatherFormat(const GatherSpec& spec, const GatherPlan& plan, InputGuard& guard, FailureSink fail)
      : spec_(spec), plan_(plan), guard_(guard), fail_(std::move(fail)) {}
  virtual ~GatherFormat() = default;

  // The scratch arena (GatherPlan's slots); set before the first step.
  void set_arena(std::byte* arena) { arena_ = arena; }

  // Segment `seg` of this member's contribution, written to its place in the output (encoded: and
  // encoded once); the bytes to send, valid until the operation ends.
  virtual std::span<const std::byte> own(size_t seg) = 0;
  // Where another member's bytes of the segment land.
  virtual std::span<std::byte> landing(size_t chunk, size_t seg) = 0;
  // Whether landed bytes already are the output (plain); else adopt() must decode them.
  virtual bool lands_in_output() const = 0;
  virtual void adopt(size_t chunk, size_t seg) = 0;

 protected:
  void check(Status s) const {
    if (!s) fail_(s.with_context("all-gather"));
  }
  std::byte* out(size_t chunk, size_t seg) const {
    return static_cast<std::byte*>(spec_.output) +
           plan_.segment(chunk, seg).begin * plan_.element_size();
  }
  // This member's input for segment `seg` of its chunk.
  const std::byte* in(size_t seg) const {
    const size_t chunk = plan_.rank();
    return static_cast<const std::byte*>(spec_.input) +
           (plan_.segment(chunk, seg).begin - plan_.partition().chunk(chunk).begin) *
               plan_.element_size();
  }
  std::span<std::byte> slot(size_t chunk, size_t seg) const {
    return plan_.slot(arena_, chunk, seg);
  }

  const GatherSpec& spec_;
  const GatherPlan& plan_;
  InputGuard& guard_;

 private:
  FailureSink fail_;
  std::byte* arena_ = nullptr;
};

// The format for spec.codec: plain for kNone, else encoded.
std::unique_ptr<GatherFormat> make_gather_format(const GatherSpec& spec, const GatherPlan& plan,
                                                 InputGuard& guard, GatherFormat::FailureSink fail);

}  // namespace longhaul::collective
