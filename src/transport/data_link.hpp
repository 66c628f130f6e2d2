// The data-link interface the collectives are written against: one bidirectional channel to one
// peer that carries many tagged transfers at once. net::Link (K TCP/TLS connections) implements
// it for the network; InProcessLink joins two ends in memory for tests. A second transport is a
// new implementation of this interface, not a change to the schedules above it.
//
// A transfer is a send or a receive of one contiguous range under a tag. The transport matches a
// send with the receive of the same tag at the other end and writes the bytes in place there;
// what the tag's bits mean is the business of the layer above (collective::Tag). Bytes that
// arrive before their receive is posted are held by the transport (within its own bound) and
// copied in when the receive comes.
//
// Contract of every implementation:
// - Completions run exactly once, on a thread of the transport, and must not block. A post that
//   can end at once (the link has failed, the tag was cancelled or is in use, a receive whose
//   bytes had all arrived already) may complete inside the posting call: a caller must not hold a
//   lock there that its completion takes.
// - A send's bytes must stay valid and unchanged, and a receive's bytes untouched by anyone else,
//   until the transfer's completion has run.
// - Failure signal: any error of the link fails it as a whole, at both ends: every pending
//   transfer completes with the reason, every later post completes with it at once, and failure()
//   reports it from then on.
// - All methods are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "common/status.hpp"

namespace longhaul::transport {

// A transfer's tag: opaque to the transport, which only matches and masks its bits.
using Tag = uint64_t;
using Completion = std::function<void(Status)>;

// Whether a cancel for `why` carries its reason to the other end (cancel_matching): only a
// mismatch does; every other cancel arrives as a plain "cancelled" (LH_ERR_ABORTED).
inline bool cancel_reason_travels(const Status& why) {
  return why.code() == LH_ERR_MISMATCH;
}

class DataLink {
 public:
  virtual ~DataLink() = default;

  // Posts a send of `bytes` under `tag`. `done` gets OK once the transport has handed every byte
  // to the channel (the remote end may not have them yet) and no longer reads them, else why not.
  // One send per tag may be pending at a time (a second one fails with LH_ERR_INVALID_ARGUMENT).
  virtual void send(Tag tag, std::span<const std::byte> bytes, Completion done) = 0;

  // Posts a receive of exactly bytes.size() bytes under `tag`. `done` gets OK once every byte has
  // arrived. A send of another size under the same tag fails the transfer with LH_ERR_PROTOCOL.
  virtual void recv(Tag tag, std::span<std::byte> bytes, Completion done) = 0;

  // Ends every transfer whose tag equals `tag` on the bits set in `mask`, present and future, at
  // both ends of the link: pending ones complete with `why` once the transport no longer touches
  // their bytes, later posts of a matching tag fail at once, and late bytes are dropped. A layer
  // that numbers the transfers of one operation under a common prefix ends all of them with one
  // call. A no-op on a failed link (everything has failed already). The remote end's transfers
  // complete with a plain "cancelled" (LH_ERR_ABORTED), except for a mismatch (LH_ERR_MISMATCH:
  // the members called a collective differently), whose reason both ends' transfers, present and
  // future, complete with, so every member reports the same words.
  virtual void cancel_matching(Tag tag, Tag mask, Status why) = 0;

  // Calls `done` once, with the reason, when a cancel that would end a transfer under `tag`
  // reaches this end (posted at either end), or the link fails; at once when either happened
  // already. For a layer that holds back its transfers for a while (a collective waiting for its
  // members' signatures) and must still learn of a cancel meanwhile. Returns an id (never 0) for
  // unwatch().
  virtual uint64_t watch_cancel(Tag tag, Completion done) = 0;
  // Forgets a watch: its `done` does not start after this returns (one already running may still
  // be). An id that completed or is unknown is ignored.
  virtual void unwatch(uint64_t id) = 0;

  // OK while the link works; afterwards the reason it failed.
  virtual Status failure() const = 0;

  // Who is at the other end, for messages and logs.
  virtual const std::string& peer() const = 0;
};

}  // namespace longhaul::transport
