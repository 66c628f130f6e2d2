#include "transport/inproc_link.hpp"

#include <cstring>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <asio/post.hpp>

#include "common/mutex.hpp"

namespace longhaul::transport {

namespace {

struct PendingRecv {
  std::span<std::byte> bytes;
  Completion done;
};

struct HeldSend {
  Tag tag = 0;
  std::span<const std::byte> bytes;
  Completion done;
};

// What one end has posted and what has arrived for it.
struct End {
  std::map<Tag, PendingRecv> recvs;
  std::map<Tag, std::vector<std::byte>> early;  // sent before the receive was posted
  std::vector<HeldSend> held;
  std::function<bool(Tag)> hold;
  struct Watch {
    Tag tag = 0;
    Completion done;
  };
  std::map<uint64_t, Watch> watches;  // watch_cancel, by id
};

// Completions gathered under the channel's lock and posted to the executor once it is released.
class Outcomes {
 public:
  explicit Outcomes(asio::any_io_executor executor) : executor_(std::move(executor)) {}
  Outcomes(const Outcomes&) = delete;
  Outcomes& operator=(const Outcomes&) = delete;
  void add(Completion done, Status s) { calls_.emplace_back(std::move(done), std::move(s)); }
  // Runs after the lock guard declared later is gone.
  ~Outcomes() {
    for (auto& [done, s] : calls_)
      asio::post(executor_, [done = std::move(done), s = std::move(s)] { done(s); });
  }

 private:
  asio::any_io_executor executor_;
  std::vector<std::pair<Completion, Status>> calls_;
};

}  // namespace

struct InProcessLink::Channel {
  explicit Channel(asio::any_io_executor e) : executor(std::move(e)) {}

  asio::any_io_executor executor;
  std::string names[2];
  mutable Mutex mu;
  Status failure GUARDED_BY(mu);
  End ends[2] GUARDED_BY(mu);
  struct Cancelled {
    Tag prefix = 0;  // tag & mask
    Tag mask = 0;
    Status reason;  // a mismatch's, which both ends' later transfers fail with; OK: plain
  };
  std::vector<Cancelled> cancelled GUARDED_BY(mu);  // for both ends
  uint64_t next_watch GUARDED_BY(mu) = 0;

  // Why a new transfer under `tag` cannot be posted, or OK.
  Status refusal(Tag tag) const REQUIRES(mu) {
    if (!failure.is_ok()) return failure;
    for (const Cancelled& c : cancelled)
      if ((tag & c.mask) == c.prefix)
        return c.reason.is_ok() ? aborted_error(fmt::format("transfer {} was cancelled", tag))
                                : c.reason;
    return Status::ok();
  }

  // Copies a send from end `from` into the other end: into its posted receive, or kept there
  // until the receive comes.
  void deliver(int from, Tag tag, std::span<const std::byte> bytes, Completion done, Outcomes& out)
      REQUIRES(mu) {
    End& to = ends[1 - from];
    if (auto it = to.recvs.find(tag); it != to.recvs.end()) {
      PendingRecv r = std::move(it->second);
      to.recvs.erase(it);
      if (r.bytes.size() != bytes.size()) {
        // The bytes were handed over; the receiver refuses them, as over the network.
        out.add(std::move(r.done),
                protocol_error(fmt::format("transfer {}: {} bytes sent, {} expected", tag,
                                           bytes.size(), r.bytes.size())));
        out.add(std::move(done), Status::ok());
        return;
      }
      if (!bytes.empty()) std::memcpy(r.bytes.data(), bytes.data(), bytes.size());
      out.add(std::move(r.done), Status::ok());
      out.add(std::move(done), Status::ok());
      return;
    }
    if (to.early.contains(tag)) {
      out.add(std::move(done), invalid_argument(fmt::format("transfer {} sent twice", tag)));
      return;
    }
    to.early[tag].assign(bytes.begin(), bytes.end());
    out.add(std::move(done), Status::ok());
  }

  // Ends everything pending at both ends whose tag matches; `why` for end `local`, a cancel
  // notice for the other.
  void cancel(int local, Tag tag, Tag mask, const Status& why, Outcomes& out) REQUIRES(mu) {
    const auto matches = [&](Tag t) { return (t & mask) == (tag & mask); };
    for (int side = 0; side < 2; ++side) {
      // Only a mismatch's reason travels, as over the network (net/frame.hpp).
      const Status reason =
          side == local || cancel_reason_travels(why)
              ? why
              : aborted_error(fmt::format("transfer {} was cancelled by {}", tag, names[local]));
      End& end = ends[side];
      std::erase_if(end.recvs, [&](auto& entry) {
        if (!matches(entry.first)) return false;
        out.add(std::move(entry.second.done), reason);
        return true;
      });
      std::erase_if(end.held, [&](HeldSend& h) {
        if (!matches(h.tag)) return false;
        out.add(std::move(h.done), reason);
        return true;
      });
      std::erase_if(end.early, [&](const auto& entry) { return matches(entry.first); });
      std::erase_if(end.watches, [&](auto& entry) {
        if (!matches(entry.second.tag)) return false;
        out.add(std::move(entry.second.done), reason);
        return true;
      });
    }
  }

  void fail_all(const Status& why, Outcomes& out) REQUIRES(mu) {
    failure = why;
    for (End& end : ends) {
      for (auto& [tag, r] : end.recvs) out.add(std::move(r.done), why);
      for (HeldSend& h : end.held) out.add(std::move(h.done), why);
      for (auto& [id, w] : end.watches) out.add(std::move(w.done), why);
      end.recvs.clear();
      end.held.clear();
      end.watches.clear();
      end.early.clear();
    }
  }
};

std::pair<std::shared_ptr<InProcessLink>, std::shared_ptr<InProcessLink>> InProcessLink::pair(
    asio::any_io_executor executor, std::string a_name, std::string b_name) {
  auto channel = std::make_shared<Channel>(std::move(executor));
  channel->names[0] = a_name;
  channel->names[1] = b_name;
  std::shared_ptr<InProcessLink> a(new InProcessLink(channel, 0, std::move(b_name)));
  std::shared_ptr<InProcessLink> b(new InProcessLink(channel, 1, std::move(a_name)));
  return {std::move(a), std::move(b)};
}

InProcessLink::InProcessLink(std::shared_ptr<Channel> channel, int side, std::string peer)
    : channel_(std::move(channel)), side_(side), peer_(std::move(peer)) {}

void InProcessLink::send(Tag tag, std::span<const std::byte> bytes, Completion done) {
  Outcomes out(channel_->executor);
  MutexLock lock(channel_->mu);
  if (Status no = channel_->refusal(tag); !no) return out.add(std::move(done), no);
  End& self = channel_->ends[side_];
  if (self.hold && self.hold(tag)) {
    self.held.push_back({tag, bytes, std::move(done)});
    return;
  }
  channel_->deliver(side_, tag, bytes, std::move(done), out);
}

void InProcessLink::recv(Tag tag, std::span<std::byte> bytes, Completion done) {
  Outcomes out(channel_->executor);
  MutexLock lock(channel_->mu);
  if (Status no = channel_->refusal(tag); !no) return out.add(std::move(done), no);
  End& self = channel_->ends[side_];
  if (self.recvs.contains(tag))
    return out.add(std::move(done),
                   invalid_argument(fmt::format("transfer {} already has a receive", tag)));
  auto early = self.early.find(tag);
  if (early == self.early.end()) {
    self.recvs[tag] = {bytes, std::move(done)};
    return;
  }
  const std::vector<std::byte> arrived = std::move(early->second);
  self.early.erase(early);
  if (arrived.size() != bytes.size())
    return out.add(std::move(done),
                   protocol_error(fmt::format("transfer {}: {} bytes sent, {} expected", tag,
                                              arrived.size(), bytes.size())));
  if (!arrived.empty()) std::memcpy(bytes.data(), arrived.data(), arrived.size());
  out.add(std::move(done), Status::ok());
}

void InProcessLink::cancel_matching(Tag tag, Tag mask, Status why) {
  Outcomes out(channel_->executor);
  MutexLock lock(channel_->mu);
  if (!channel_->failure.is_ok()) return;
  channel_->cancelled.push_back(
      {tag & mask, mask, cancel_reason_travels(why) ? why : Status::ok()});
  channel_->cancel(side_, tag, mask, why, out);
}

Status InProcessLink::failure() const {
  MutexLock lock(channel_->mu);
  return channel_->failure;
}

uint64_t InProcessLink::watch_cancel(Tag tag, Completion done) {
  // A cancel fires a watch when it matches the watch's tag on the cancel's own mask, as it would
  // a transfer posted under that tag.
  Outcomes out(channel_->executor);
  MutexLock lock(channel_->mu);
  const uint64_t id = ++channel_->next_watch;
  if (Status no = channel_->refusal(tag); !no)
    out.add(std::move(done), no);
  else
    channel_->ends[side_].watches[id] = {tag, std::move(done)};
  return id;
}

void InProcessLink::unwatch(uint64_t id) {
  Completion dropped;  // destroyed after the lock
  MutexLock lock(channel_->mu);
  auto& watches = channel_->ends[side_].watches;
  if (auto it = watches.find(id); it != watches.end()) {
    dropped = std::move(it->second.done);
    watches.erase(it);
  }
}

void InProcessLink::fail(Status why) {
  Outcomes out(channel_->executor);
  MutexLock lock(channel_->mu);
  if (channel_->failure.is_ok()) channel_->fail_all(why, out);
}

void InProcessLink::hold_sends(std::function<bool(Tag)> hold) {
  MutexLock lock(channel_->mu);
  channel_->ends[side_].hold = std::move(hold);
}

void InProcessLink::release_held() {
  Outcomes out(channel_->executor);
  MutexLock lock(channel_->mu);
  std::vector<HeldSend> held = std::move(channel_->ends[side_].held);
  channel_->ends[side_].held.clear();
  for (HeldSend& h : held) channel_->deliver(side_, h.tag, h.bytes, std::move(h.done), out);
}

size_t InProcessLink::held_sends() const {
  MutexLock lock(channel_->mu);
  return channel_->ends[side_].held.size();
}

}  // namespace longhaul::transport
