#include "wanlab/forwarder.hpp"

#include <unistd.h>

#include <cerrno>

#include "wanlab/packet.hpp"

namespace longhaul::wanlab {
namespace {

// A super-packet is at most 64 KiB of IP plus the vnet header.
constexpr size_t kMaxFrame = 65536 + kVnetHeaderBytes + 256;
// Frames read from one device before the others get their turn.
constexpr int kReadBatch = 64;
// What may wait inside the lab in all: far above any path's bandwidth-delay product here, and a
// bound on memory when a path has no rate cap and a long delay.
constexpr uint64_t kMaxQueuedBytes = uint64_t{1} << 30;

std::vector<PathModel> make_paths(const LabSpec& spec) {
  const size_t n = spec.sites.size();
  std::vector<PathModel> paths;
  paths.reserve(n * n);
  for (size_t from = 0; from < n; ++from) {
    for (size_t to = 0; to < n; ++to) {
      PathShape shape = spec.defaults;
      for (const PathSetting& p : spec.paths) {
        const bool forward = p.from == spec.sites[from] && p.to == spec.sites[to];
        const bool backward =
            p.both_directions && p.to == spec.sites[from] && p.from == spec.sites[to];
        // check_lab_spec and parse_path_setting validated every field; applying cannot fail.
        if (forward || backward) (void)apply_setting(p, &shape);
      }
      // Each direction draws from its own generator: the same seed gives the same losses.
      paths.emplace_back(shape, spec.seed * 1'000'003 + from * n + to);
    }
  }
  return paths;
}

}  // namespace

Forwarder::Forwarder(Lab& lab, const LabSpec& spec)
    : lab_(lab), sites_(spec.sites.size()), paths_(make_paths(spec)), scratch_(kMaxFrame) {}

bool Forwarder::read_site(size_t index, int64_t now_ns) {
  const int fd = lab_.sites()[index].tun.fd();
  for (int i = 0; i < kReadBatch; ++i) {
    const ssize_t n = ::read(fd, scratch_.data(), scratch_.size());
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    ++counters_.frames_read;
    route(index, std::span(scratch_.data(), static_cast<size_t>(n)), now_ns);
  }
  return true;
}

void Forwarder::route(size_t from, std::span<const std::byte> frame, int64_t now_ns) {
  PacketInfo info;
  const size_t to = inspect(frame, &info) ? site_of(info.dst_ipv4, sites_) : std::string::npos;
  if (to == std::string::npos || to == from) {
    ++counters_.unroutable;
    return;
  }
  PathModel& p = path(from, to);
  // Loss is drawn per wire packet: a super-packet with a lost segment is cut into its segments
  // and only the lost ones are dropped, so TCP sees the loss pattern of MTU packets.
  std::vector<bool> keep(info.segments, true);
  bool any_lost = false;
  for (size_t i = 0; i < keep.size(); ++i) {
    keep[i] = !p.draw_loss();
    any_lost |= !keep[i];
  }
  // A super-packet that does not fit the bottleneck's queue whole is cut too: the wire packets
  // that fit are queued, the rest dropped, instead of losing ~44 MSS segments as one.
  if (!any_lost && !p.would_overflow(now_ns, info.wire_bytes)) {
    enqueue(to, p, std::vector<std::byte>(frame.begin(), frame.end()), now_ns);
    return;
  }
  for (std::vector<std::byte>& seg : split_segments(frame, keep))
    enqueue(to, p, std::move(seg), now_ns);
}

void Forwarder::enqueue(size_t to, PathModel& p, std::vector<std::byte> frame, int64_t now_ns) {
  PacketInfo info;
  inspect(frame, &info);
  const std::optional<int64_t> due = p.admit(now_ns, info.wire_bytes, info.segments);
  if (!due) return;
  if (queued_bytes_ + frame.size() > kMaxQueuedBytes) {
    ++counters_.overflow;
    return;
  }
  queued_bytes_ += frame.size();
  queue_.push(Pending{*due, seq_++, to, std::move(frame)});
}

void Forwarder::deliver_due(int64_t now_ns) {
  while (!queue_.empty() && queue_.top().due <= now_ns) {
    // priority_queue::top is const; the frame is moved out before pop, which only reorders.
    Pending& top = const_cast<Pending&>(queue_.top());
    std::vector<std::byte> frame = std::move(top.frame);
    const size_t to = top.to;
    queue_.pop();
    queued_bytes_ -= frame.size();
    const ssize_t n = ::write(lab_.sites()[to].tun.fd(), frame.data(), frame.size());
    if (n == static_cast<ssize_t>(frame.size())) {
      ++counters_.frames_written;
      counters_.bytes_written += frame.size() - kVnetHeaderBytes;
    } else {
      ++counters_.write_errors;
    }
  }
}

std::optional<int64_t> Forwarder::next_due() const {
  if (queue_.empty()) return std::nullopt;
  return queue_.top().due;
}

}  // namespace longhaul::wanlab
