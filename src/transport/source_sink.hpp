// Where a send's bytes come from and where a receive's bytes go: ranges that may become ready
// later. This separates where bytes go (a DataLink) from where they come from (a Source or Sink).
//
// A schedule names the memory of each of its transfers, and the operation's Staging turns that
// range into a Source or a Sink. For host memory both are ready at once and landing costs nothing.
// Staging for device memory (the GPU layer) is another Staging: its source's bytes are a pinned
// host slot, ready once the device-to-host copy into it has finished, and its sink receives into
// a pinned slot and lands by copying that to the device. The schedules do not change.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "common/status.hpp"
#include "transport/data_link.hpp"

namespace longhaul::transport {

class Source {
 public:
  using Ready = std::function<void(Result<std::span<const std::byte>>)>;
  virtual ~Source() = default;
  // Calls `ready` exactly once, possibly at once on this thread, possibly later on another: with
  // the bytes to send, valid and unchanged until the send posted with them has completed, or with
  // why they will never be ready.
  virtual void when_ready(Ready ready) = 0;
};

class Sink {
 public:
  using Ready = std::function<void(Result<std::span<std::byte>>)>;
  virtual ~Sink() = default;
  // Calls `ready` exactly once, as Source::when_ready does, with the bytes a receive may write.
  virtual void when_ready(Ready ready) = 0;
  // The receive posted into those bytes completed with `how`: calls `done` exactly once (on any
  // thread) when the bytes are where they belong, or with why not (at least `how` when it failed).
  virtual void land(Status how, Completion done) = 0;
};

// Makes the sources and sinks of an operation's transfers. Thread-safe; outlives the operation.
class Staging {
 public:
  virtual ~Staging() = default;
  virtual std::shared_ptr<Source> source(std::span<const std::byte> bytes) const = 0;
  virtual std::shared_ptr<Sink> sink(std::span<std::byte> bytes) const = 0;
};

// Host memory: ready at once, landing costs nothing.
const Staging& host_staging();

// Posts a send of `source`'s bytes on `link` under `tag` once they are ready. `done` runs exactly
// once: with the send's outcome, or with the source's failure (then nothing was posted).
void send_from(std::shared_ptr<DataLink> link, Tag tag, std::shared_ptr<Source> source,
               Completion done);
// Posts a receive into `sink`'s bytes once they are ready, and lands them when it completes.
// `done` runs exactly once, after landing, with the first failure of the three steps.
void recv_into(std::shared_ptr<DataLink> link, Tag tag, std::shared_ptr<Sink> sink,
               Completion done);

}  // namespace longhaul::transport
