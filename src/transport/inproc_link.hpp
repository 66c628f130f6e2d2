// Two DataLinks joined in memory: what one end sends, the other receives, with no socket. The
// collective unit tests run every schedule over it (they pass with no network interface at all),
// and its fault hooks fail a link, hold transfers back or cancel them at any step.
//
// It keeps the DataLink contract the way net::Link does: a send completes once its bytes are
// copied into the channel (into the posted receive, or held for a receive posted later), cancels
// reach both ends, later posts of a cancelled tag fail at once, and a failed link fails every
// transfer at both ends. Completions run on the executor given to pair(), never inside the posting
// call. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <asio/any_io_executor.hpp>

#include "transport/data_link.hpp"

namespace longhaul::transport {

class InProcessLink final : public DataLink {
 public:
  // Joins two ends: the first's peer() is `b_name`, the second's `a_name`. Completions of both run
  // on `executor`, which must outlive every transfer.
  static std::pair<std::shared_ptr<InProcessLink>, std::shared_ptr<InProcessLink>> pair(
      asio::any_io_executor executor, std::string a_name, std::string b_name);

  void send(Tag tag, std::span<const std::byte> bytes, Completion done) override;
  void recv(Tag tag, std::span<std::byte> bytes, Completion done) override;
  void cancel_matching(Tag tag, Tag mask, Status why) override;
  uint64_t watch_cancel(Tag tag, Completion done) override;
  void unwatch(uint64_t id) override;
  Status failure() const override;
  const std::string& peer() const override { return peer_; }

  // Faults, for tests.
  // Fails the link at both ends with `why`, as the closed sockets of a dead process would.
  void fail(Status why);
  // Holds back this end's sends whose tag satisfies `hold`: neither delivered nor completed until
  // release_held() (a cancel or the link failing still ends them). Replaces an earlier predicate;
  // an empty one holds nothing more.
  void hold_sends(std::function<bool(Tag)> hold);
  // Delivers every held send, in the order they were posted.
  void release_held();
  size_t held_sends() const;

  struct Channel;  // shared by both ends

 private:
  InProcessLink(std::shared_ptr<Channel> channel, int side, std::string peer);

  std::shared_ptr<Channel> channel_;
  const int side_;  // 0 or 1: this end's index in the channel
  const std::string peer_;
};

}  // namespace longhaul::transport
