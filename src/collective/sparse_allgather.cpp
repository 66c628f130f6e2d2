#include "collective/sparse_allgather.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include <fmt/format.h>

#include "collective/gather_plan.hpp"
#include "collective/segment_staging.hpp"

namespace longhaul::collective {

namespace {

using MemberName = std::function<std::string(size_t rank)>;

std::string member(const MemberName& name, size_t rank) {
  return name ? name(rank) : fmt::format("the member at ring position {}", rank);
}

// A check's refusal of member r's contribution as every member reports it.
Status named(const MemberName& name, size_t rank, size_t bytes, const Status& s) {
  if (s.is_ok()) return s;
  return protocol_error(fmt::format("the contribution of {} ({} bytes) is malformed: {}",
                                    member(name, rank), bytes, s.message()));
}

// Step 2 of a member that cannot take part (it could not allocate the contributions' buffer): an
// operation numbered like everyone's step 2 whose own input never arrives, so it fails before it
// sends anything and cancels the operation at every member that started it, instead of leaving
// them waiting for this member's segments.
class FailingStaging final : public SegmentStaging {
 public:
  explicit FailingStaging(Status why) : why_(std::move(why)) {}
  void begin(const InputPlan&, CopyStarted) override {}
  void when_input_ready(size_t, size_t, Ready ready) override { ready(why_); }
  std::span<const std::byte> encoded_input(size_t, size_t) const override { return {}; }
  Status load_all() override { return why_; }
  void result_final(size_t, size_t, std::span<const std::byte>) override {}

 private:
  const Status why_;
};

}  // namespace

// Step 2's hook (segment_staging.hpp, used only for its "final" reports): the contributions are
// host memory, so every input is ready at once and nothing is copied; result_final() counts each
// contribution's segments down, and the one that makes it whole runs the check on the worker pool.
// The check is one of the operation's tasks (held through CopyStarted), so the operation completes
// only once every verdict is in.
class CheckStaging final : public SegmentStaging {
 public:
  CheckStaging(runtime::WorkerPool& workers, std::shared_ptr<SparseGathered> result,
               ContributionCheck check, MemberName name, const std::vector<size_t>& segments)
      : workers_(workers),
        result_(std::move(result)),
        check_(std::make_shared<const ContributionCheck>(std::move(check))),
        name_(std::make_shared<const MemberName>(std::move(name))),
        remaining_(std::make_unique<std::atomic<size_t>[]>(segments.size())) {
    for (size_t c = 0; c < segments.size(); ++c) remaining_[c].store(segments[c]);
  }

  void begin(const InputPlan&, CopyStarted copy_started) override {
    copy_started_ = std::move(copy_started);
  }
  void when_input_ready(size_t, size_t, Ready ready) override { ready(Status::ok()); }
  std::span<const std::byte> encoded_input(size_t, size_t) const override { return {}; }
  Status load_all() override { return Status::ok(); }

  // Segments of one contribution become final on several threads: the last one (acq_rel: it sees
  // every earlier segment's bytes) starts the check.
  void result_final(size_t chunk, size_t, std::span<const std::byte>) override {
    if (remaining_[chunk].fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    CopyEnded done = copy_started_();
    workers_.post([result = result_, check = check_, name = name_, chunk, done = std::move(done)] {
      const auto bytes = result->contribution(chunk);
      result->verdicts_[chunk] = named(*name, chunk, bytes.size(), (*check)(chunk, bytes));
      done(Status::ok());
    });
  }

 private:
  runtime::WorkerPool& workers_;
  const std::shared_ptr<SparseGathered> result_;
  const std::shared_ptr<const ContributionCheck> check_;
  const std::shared_ptr<const MemberName> name_;
  std::unique_ptr<std::atomic<size_t>[]> remaining_;  // segments of each contribution not final
  CopyStarted copy_started_;                          // set by begin(), before any result_final
};

std::vector<size_t> SparseGathered::malformed() const {
  std::vector<size_t> out;
  for (size_t r = 0; r < verdicts_.size(); ++r)
    if (!verdicts_[r].is_ok()) out.push_back(r);
  return out;
}

Status SparseGathered::refusal() const {
  const auto bad = malformed();
  if (bad.empty()) return Status::ok();
  if (bad.size() == 1) return verdicts_[bad[0]];
  return protocol_error(fmt::format("{} (and {} more malformed contribution{})",
                                    verdicts_[bad[0]].message(), bad.size() - 1,
                                    bad.size() == 2 ? "" : "s"));
}

SparseAllGather::SparseAllGather(runtime::WorkerPool& workers, GatherStarter start_gather,
                                 SparseGatherSpec spec)
    : workers_(workers),
      start_gather_(std::move(start_gather)),
      spec_(std::move(spec)),
      result_(std::make_shared<SparseGathered>()) {}

SparseAllGather::~SparseAllGather() {
  bool started;
  {
    MutexLock lock(mu_);
    started = data_started_;
  }
  // Never left half way: the other members would wait for this member's step 2. Numbered where
  // theirs is and failed before it sends anything, it fails theirs at once.
  if (!started && sizes_op_) {
    if (sizes_op_->wait().is_ok())
      (void)start_contributions(aborted_error(
          "a member abandoned the sparse all-gather before its contributions travelled"));
    MutexLock lock(mu_);
    data_started_ = true;
  }
  // The operations write into this object (the sizes) until they complete.
  if (sizes_op_) (void)sizes_op_->wait();
  if (auto last = op()) (void)last->wait();
}

Result<std::shared_ptr<SparseAllGather>> SparseAllGather::start(runtime::WorkerPool& workers,
                                                                const RingView& view,
                                                                GatherStarter start_gather,
                                                                SparseGatherSpec spec) {
  if (!start_gather) return invalid_argument("sparse all-gather: no way to start a collective");
  if (spec.segment_bytes == 0) return invalid_argument("segment_bytes must be positive");
  if (view.size == 0 || view.rank >= view.size) return invalid_argument("invalid ring view");
  if (!spec.contribution.empty() && spec.contribution.data() == nullptr)
    return invalid_argument("sparse all-gather: the contribution must not be NULL");
  std::shared_ptr<SparseAllGather> g(
      new SparseAllGather(workers, std::move(start_gather), std::move(spec)));
  g->own_size_ = g->spec_.contribution.size();
  g->sizes_.assign(view.size, 0);
  g->result_->rank_ = view.rank;
  g->result_->epoch_ = view.epoch;

  GatherSpec sizes;
  sizes.input = &g->own_size_;
  sizes.output = g->sizes_.data();
  sizes.counts.assign(view.size, 1);
  sizes.dtype = quant::DType::kU64;
  sizes.schedule = g->spec_.schedule;
  sizes.restore_output = false;  // our own buffer: a failure discards it
  auto op = g->start_gather_(sizes);
  if (!op) return op.status();
  g->sizes_op_ = std::move(*op);
  // Its sizes are by ring position of the view it runs on: it must be the caller's.
  if (g->sizes_op_->epoch() != view.epoch) {
    const Status why = aborted_error(fmt::format(
        "the ring changed (epoch {} to {}) as the sparse all-gather started; update the topology "
        "and retry",
        view.epoch, g->sizes_op_->epoch()));
    g->sizes_op_->abort(why);
    (void)g->sizes_op_->wait();
    {
      MutexLock lock(g->mu_);
      g->data_started_ = true;  // nothing more will start
      g->outcome_ = why;
    }
    return why;
  }
  return g;
}

bool SparseAllGather::sizes_known() const {
  return sizes_op_->test();
}

Status SparseAllGather::start_data() {
  {
    MutexLock lock(mu_);
    if (data_started_) return internal_error("sparse all-gather: start_data() called twice");
  }
  Status s = sizes_op_->wait();
  if (s) s = start_contributions();
  MutexLock lock(mu_);
  data_started_ = true;
  if (!s) outcome_ = s;
  return s;
}

Status SparseAllGather::take_sizes(Status* no_memory) {
  const size_t members = sizes_.size(), rank = result_->rank_;
  if (sizes_[rank] != own_size_)
    return internal_error(fmt::format("sparse all-gather: this member's size came back as {}, not {}",
                                      sizes_[rank], own_size_));
  size_t largest = 0;
  uint64_t total = 0;
  bool too_large = false;
  for (size_t r = 0; r < members; ++r) {
    if (sizes_[r] > sizes_[largest]) largest = r;
    too_large = too_large || sizes_[r] > std::numeric_limits<uint64_t>::max() - total;
    total += sizes_[r];
  }
  const uint64_t limit = spec_.max_total_bytes != 0 ? spec_.max_total_bytes
                                                    : std::numeric_limits<size_t>::max() / 2;
  if (too_large || total > limit)
    return protocol_error(fmt::format(
        "sparse all-gather: the contributions add up to more than {} bytes; the largest is {}'s, "
        "{} bytes",
        limit, member(spec_.name_member, largest), sizes_[largest]));
  SparseGathered& g = *result_;
  g.sizes_.assign(sizes_.begin(), sizes_.end());
  g.offsets_.assign(members, 0);
  for (size_t r = 1; r < members; ++r) g.offsets_[r] = g.offsets_[r - 1] + g.sizes_[r - 1];
  g.total_ = static_cast<size_t>(total);
  g.verdicts_.assign(members, Status::ok());
  if (total == 0) return Status::ok();
  try {
    g.bytes_ = std::make_unique_for_overwrite<std::byte[]>(g.total_);
  } catch (const std::bad_alloc&) {
    *no_memory = io_error(
        fmt::format("sparse all-gather: cannot allocate {} bytes for the contributions", total));
  }
  return Status::ok();
}

std::shared_ptr<SegmentStaging> SparseAllGather::check_staging(const GatherSpec& data) {
  SparseGathered& g = *result_;
  const size_t members = g.members();
  // The segments of each contribution that travel (and become final), as the operation cuts
  // them; a contribution with none (empty) is checked here at once.
  const GatherPlan plan(Schedule::kRing, members, g.rank_, data);
  std::vector<size_t> segments(members, 0);
  for (size_t r = 0; r < members; ++r) {
    for (size_t s = 0; s < plan.segments(); ++s) segments[r] += plan.travels(r, s) ? 1 : 0;
    if (segments[r] == 0) g.verdicts_[r] = named(spec_.name_member, r, 0, spec_.check(r, {}));
  }
  return std::make_shared<CheckStaging>(workers_, result_, spec_.check, spec_.name_member,
                                        segments);
}

Status SparseAllGather::start_contributions(const Status& refuse) {
  // The sizes are the same on every member, so is every decision taken from them here: whether
  // they are acceptable, and whether step 2 runs. Only the allocation is this member's own.
  Status no_memory;
  LH_RETURN_IF_ERROR(take_sizes(&no_memory));
  SparseGathered& g = *result_;
  const size_t members = g.members();
  const Status failure = !refuse.is_ok() ? refuse : no_memory;
  // Nothing travels: every contribution is empty, or this member is alone.
  if (members == 1 || g.total_ == 0) {
    if (!failure.is_ok()) return failure;
    if (g.total_ > 0) std::memcpy(g.bytes_.get(), spec_.contribution.data(), g.total_);
    check_here();
    return Status::ok();
  }
  GatherSpec data;
  data.dtype = quant::DType::kU8;
  data.schedule = spec_.schedule;
  data.segment_bytes = spec_.segment_bytes;
  data.restore_output = false;  // our own buffer: a failure discards it
  data.input = own_size_ > 0 ? spec_.contribution.data() : nullptr;
  data.output = g.bytes_.get();
  data.counts.assign(g.sizes_.begin(), g.sizes_.end());
  if (!failure.is_ok()) {
    // Numbered where the others' step 2 is and failed before it sends anything, it cancels theirs
    // instead of leaving them waiting for this member. Without a buffer its receives cannot land:
    // it expects nothing then (a size mismatch, should a segment come first, fails it as well).
    if (!no_memory.is_ok()) {
      data.input = data.output = nullptr;
      data.signed_counts = &g.sizes_;
      data.counts.assign(members, 0);
    }
    data.segment_staging = std::make_shared<FailingStaging>(failure);
    if (auto op = start_gather_(data)) (void)(*op)->wait();
    return failure;
  }
  if (spec_.check) data.segment_staging = check_staging(data);
  auto op = start_gather_(data);
  if (!op) return op.status();
  if ((*op)->epoch() != sizes_op_->epoch()) {
    const Status why = aborted_error(
        fmt::format("the ring changed (epoch {} to {}) between the sparse all-gather's sizes and "
                    "its contributions; update the topology and retry",
                    sizes_op_->epoch(), (*op)->epoch()));
    (*op)->abort(why);
    (void)(*op)->wait();
    return why;
  }
  MutexLock lock(mu_);
  data_op_ = std::move(*op);
  return Status::ok();
}

void SparseAllGather::check_here() {
  if (!spec_.check) return;
  SparseGathered& g = *result_;
  for (size_t r = 0; r < g.members(); ++r)
    g.verdicts_[r] = named(spec_.name_member, r, g.size(r), spec_.check(r, g.contribution(r)));
}

bool SparseAllGather::test() const {
  MutexLock lock(mu_);
  if (!data_started_) return false;
  return data_op_ ? data_op_->test() : true;
}

Status SparseAllGather::wait() {
  std::shared_ptr<GatherOp> op;
  {
    MutexLock lock(mu_);
    if (!data_started_)
      return internal_error("sparse all-gather: wait() before start_data()");
    if (!outcome_.is_ok()) return outcome_;
    op = data_op_;
  }
  return op ? op->wait() : Status::ok();
}

void SparseAllGather::abort(const Status& why) {
  std::shared_ptr<GatherOp> op;
  {
    MutexLock lock(mu_);
    op = data_op_ ? data_op_ : sizes_op_;
  }
  if (op) op->abort(why);
}

std::shared_ptr<Operation> SparseAllGather::op() const {
  MutexLock lock(mu_);
  if (data_op_) return data_op_;
  return sizes_op_;
}

OpInfo SparseAllGather::info() const {
  OpInfo info = sizes_op_ ? sizes_op_->info() : OpInfo{};
  std::shared_ptr<GatherOp> data;
  {
    MutexLock lock(mu_);
    data = data_op_;
  }
  if (data) {
    const OpInfo d = data->info();
    info.bytes_sent += d.bytes_sent;
    info.bytes_received += d.bytes_received;
    info.schedule = d.schedule;
  }
  return info;
}

std::shared_ptr<const SparseGathered> SparseAllGather::result() const {
  MutexLock lock(mu_);
  if (!data_started_ || !outcome_.is_ok()) return nullptr;
  if (data_op_ && (!data_op_->test() || !data_op_->status().is_ok())) return nullptr;
  return result_;
}

Result<std::shared_ptr<SparseAllGather>> start_sparse_allgather(runtime::WorkerPool& workers,
                                                                const RingView& view,
                                                                GatherStarter start_gather,
                                                                SparseGatherSpec spec) {
  auto g = SparseAllGather::start(workers, view, std::move(start_gather), std::move(spec));
  if (!g) return g.status();
  if (Status s = (*g)->start_data(); !s) return s;
  return g;
}

}  // namespace longhaul::collective
