#include "node/shm_local_group.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "node/shm_layout.hpp"

namespace longhaul::node {

namespace {

using Clock = std::chrono::steady_clock;

bool process_gone(int pid) {
  return kill(pid, 0) != 0 && errno == ESRCH;
}

// Ranks that disagree on the group's shape: the segment is aborted, so the ranks already in it
// fail at once instead of waiting out their timeout, and this rank gets the reason.
Status refuse_shape(SharedSegment& segment, std::string why) {
  auto& h = *reinterpret_cast<ShmHeader*>(segment.data());
  const Status refused = invalid_argument(std::move(why));
  SharedBarrier(&h.barrier, h.size, std::chrono::milliseconds(1), [] { return Status::ok(); })
      .abort(refused);
  return refused;
}

}  // namespace

Result<std::unique_ptr<ShmLocalGroup>> ShmLocalGroup::create(const ShmLocalGroupOptions& o) {
  if (Status s = check_segment_name(o.name); !s) return s;
  if (o.size == 0 || o.size > kMaxLocalRanks || o.rank >= o.size)
    return invalid_argument(
        fmt::format("local group: rank {} of {} ranks (a group has 1 to {} ranks)", o.rank, o.size,
                    kMaxLocalRanks));
  if (o.slot_bytes < kPieceAlign * o.size || o.slot_bytes > (size_t{1} << 32))
    return invalid_argument(
        fmt::format("local group: slot_bytes {} must be {} to 2^32 for {} ranks", o.slot_bytes,
                    kPieceAlign * o.size, o.size));
  if (o.timeout.count() <= 0) return invalid_argument("local group: the timeout must be positive");
  auto segment = o.rank == 0 ? create_segment(o) : open_segment(o);
  if (!segment) return segment.status();
  std::unique_ptr<ShmLocalGroup> group(new ShmLocalGroup(o, std::move(*segment)));
  if (Status s = group->join(); !s) return s;
  return group;
}

ShmLocalGroup::ShmLocalGroup(ShmLocalGroupOptions options, SharedSegment segment)
    : options_(std::move(options)), segment_(std::move(segment)), pidfds_(options_.size, -1) {
  barrier_ = std::make_unique<SharedBarrier>(&header().barrier, options_.size, options_.timeout,
                                             [this] { return siblings_alive(); });
}

ShmLocalGroup::~ShmLocalGroup() {
  abort(closed_error(
      fmt::format("local rank {} (pid {}) closed its local group", options_.rank, getpid())));
  for (int fd : pidfds_)
    if (fd >= 0) close(fd);
}

Result<SharedSegment> ShmLocalGroup::create_segment(const ShmLocalGroupOptions& o) {
  const size_t slot = round_up(o.slot_bytes, kPage);
  auto segment = SharedSegment::create(o.name, kHeaderBytes + slot * o.size);
  if (!segment) return segment.status();
  auto* h = new (segment->data()) ShmHeader{};
  h->size = o.size;
  h->creator_pid = static_cast<uint32_t>(getpid());
  h->slot_bytes = slot;
  h->ready.store(kSegmentReady, std::memory_order_release);
  return segment;
}

Result<SharedSegment> ShmLocalGroup::open_segment(const ShmLocalGroupOptions& o) {
  const auto deadline = Clock::now() + o.timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    auto opened = SharedSegment::open(o.name);
    if (!opened) return opened.status();
    if (*opened && (*opened)->size() >= kHeaderBytes) {
      const auto& h = *reinterpret_cast<const ShmHeader*>((*opened)->data());
      if (h.ready.load(std::memory_order_acquire) == kSegmentReady &&
          !process_gone(static_cast<int>(h.creator_pid))) {
        if (h.size != o.size || h.slot_bytes != round_up(o.slot_bytes, kPage))
          return refuse_shape(**opened, fmt::format("local group '{}': rank 0 formed it with {} "
                                                    "ranks and {}-byte slots, rank {} asks "
                                                    "for {} ranks and {}-byte slots",
                                                    o.name, h.size, h.slot_bytes, o.rank, o.size,
                                                    round_up(o.slot_bytes, kPage)));
        return std::move(**opened);
      }
      // Being initialised, or stale (its creator is dead): look again.
    }
    if (Clock::now() >= deadline)
      return timeout_error(fmt::format("local group '{}': rank 0 did not create it within {} ms",
                                       o.name, o.timeout.count()));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

Status ShmLocalGroup::join() {
  const auto me = static_cast<int32_t>(getpid());
  int32_t none = 0;
  auto& pid = header().member_pids[options_.rank];
  if (!pid.compare_exchange_strong(none, me, std::memory_order_acq_rel))
    return invalid_argument(fmt::format("local group '{}': rank {} joined twice (pids {} and {})",
                                        options_.name, options_.rank, none, me));
  if (Status s = barrier_->arrive_and_wait("forming the group"); !s) {
    if (options_.rank == 0) (void)segment_.unlink();  // a retry must not find this one
    if (s.code() != LH_ERR_TIMEOUT) return s;
    std::string missing;
    for (uint32_t r = 0; r < options_.size; ++r)
      if (header().member_pids[r].load() == 0)
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    return s.with_context(
        fmt::format("local group '{}' never formed (rank(s) {} missing)", options_.name, missing));
  }
  // Watch every sibling from now on (a pid reused after a death would fool a later look). A
  // sibling may already have gone on, and even exited: that is for a later wait to judge.
  (void)siblings_alive();
  // Every rank has the segment mapped: the name is no longer needed, and would outlive a crash.
  if (options_.rank == 0) return segment_.unlink();
  return Status::ok();
}

Status ShmLocalGroup::siblings_alive() {
  for (uint32_t r = 0; r < options_.size; ++r) {
    if (r == options_.rank) continue;
    const int32_t pid = header().member_pids[r].load(std::memory_order_acquire);
    if (pid == 0) continue;  // not joined yet: the forming barrier's timeout covers it
    if (pidfds_[r] < 0) {
      const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
      if (fd >= 0) {
        pidfds_[r] = fd;
      } else if (errno == ESRCH || process_gone(pid)) {
        return node_evicted(fmt::format("local rank {} (pid {}) died", r, pid));
      } else {
        continue;  // a kernel without pidfds: kill(0) is the best there is
      }
    }
    pollfd p{pidfds_[r], POLLIN, 0};
    if (poll(&p, 1, 0) > 0) return node_evicted(fmt::format("local rank {} (pid {}) died", r, pid));
  }
  return Status::ok();
}

void ShmLocalGroup::abort(const Status& why) {
  barrier_->abort(why);
}

Status ShmLocalGroup::abort_with(const Status& why) {
  abort(why);
  return why;
}

}  // namespace longhaul::node
