// The fetch behind fetch_blocks (fetcher.hpp): the plan's blocks cut into chunks, the sources
// and their links, and the queue the sources take chunks from. fetcher.cpp sets it up and
// schedules the chunks; fetch_arrivals.cpp handles what the sources send back (blocks, refusals,
// failures). Internal to lh_state_sync.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <asio/steady_timer.hpp>

#include "common/mutex.hpp"
#include "net/link.hpp"
#include "state/fetcher.hpp"

namespace longhaul::state::fetch {

using Clock = std::chrono::steady_clock;
using Actions = std::vector<std::function<void()>>;

inline void run(Actions& actions) {
  for (auto& a : actions) a();
  actions.clear();
}

struct Chunk {
  uint32_t tensor = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  bool compressible = false;     // the plan's word for its blocks
  bool compressed = false;       // how its current request travels
  std::vector<uint64_t> hashes;  // expected, one per block
  std::vector<size_t> sources;   // indices into Fetch::sources_
  std::set<size_t> failed_at;
};

struct Source {
  enum class State { kConnecting, kUp, kDead };
  uint64_t id = 0;
  std::string host;
  uint16_t port = 0;
  State state = State::kConnecting;
  std::shared_ptr<net::Link> link;
  std::map<uint64_t, size_t> in_flight;  // request -> chunk
  Clock::time_point last_progress;
  Status why;
  bool used = false;
  ZstdChoice zstd;
};

class Fetch : public std::enable_shared_from_this<Fetch> {
 public:
  Fetch(runtime::Runtime& runtime, const FetchOptions& options, const Registry& registry,
        const wire::StatePlanMsg& plan);

  Status run_to_end(LostSources* lost, FetchStats* stats);

 private:
  void connect(size_t s) EXCLUDES(mu_);

  void on_connected(size_t s, Result<std::shared_ptr<net::Link>> r);

  // Gives every live source with room the next chunks it holds; fails the fetch when a chunk has
  // no source left.
  void pump(Actions& actions) REQUIRES(mu_);

  uint64_t chunk_bytes(const Chunk& c) const;

  // The chunk's request from `s` is over; it delivered its blocks when `delivered`.
  // For a compressed chunk, the source's and this side's time (de)compressing it.
  void chunk_ended(size_t s, const Chunk& c, bool delivered, uint64_t compress_ns = 0,
                   uint64_t decompress_ns = 0) REQUIRES(mu_);

  // Cuts a queued chunk after its first block; returns the new chunk of the rest. Requires room
  // in chunks_ (it must not reallocate).
  size_t split_after_first_block(size_t chunk) REQUIRES(mu_);

  // Requests the chunk from source s; returns the chunk made of the rest of its blocks when only
  // its first went out (a zstd probe).
  std::optional<size_t> issue(size_t s, size_t chunk, Actions& actions) REQUIRES(mu_);

  void on_raw_received(size_t s, uint64_t request, Status st);

  // Decompresses (when `compressed` holds the blocks; the source took compress_ns to compress
  // them) and checks every block of the chunk.
  void verify(size_t s, size_t chunk, std::vector<wire::CompressedBlock> compressed,
              uint64_t compress_ns = 0);
  // The chunk verify() reads without the lock, which the analysis cannot see is safe: chunks_
  // never reallocates (reserved at construction) and nothing changes a chunk in verification.
  const Chunk& chunk_in_verification(size_t chunk) const NO_THREAD_SAFETY_ANALYSIS {
    return chunks_[chunk];
  }

  void on_control(size_t s, const std::vector<std::byte>& bytes);

  // The master lost this peer: drop it now (its link may never fail: a stopped process's kernel
  // keeps the sockets open). Closing the link fails its raw receives, which requeues their chunks.
  void on_source_lost(uint64_t peer);

  void on_link_failed(size_t s, const Status& why);

  // Marks the source dead; its compressed requests go back to the queue at once (its raw ones
  // when their receives fail).
  void drop_source(size_t s, const Status& why) REQUIRES(mu_);

  // Runs `task` on the runtime's workers, counted in tasks_ until it has returned; the task keeps
  // this fetch alive.
  template <class Task>
  void post_task(Task task) REQUIRES(mu_) {
    ++tasks_;
    workers_.post([self = shared_from_this(), task = std::move(task)]() mutable {
      task();
      MutexLock lock(self->mu_);
      if (--self->tasks_ == 0) self->done_cv_.notify_all();
    });
  }

  void requeue(size_t s, size_t chunk) REQUIRES(mu_);

  void fail(Status why, Actions& actions) REQUIRES(mu_);

  void check_done() REQUIRES(mu_);

  void arm_stall_timer();

  runtime::IoRuntime& io_;
  runtime::WorkerPool& workers_;  // verifies (and decompresses) the chunks that arrive
  const FetchOptions options_;
  const Registry& registry_;
  asio::steady_timer stall_timer_;

  Mutex mu_;
  CondVar done_cv_;
  std::vector<Source> sources_ GUARDED_BY(mu_);
  std::vector<Chunk> chunks_ GUARDED_BY(mu_);
  std::deque<size_t> queue_ GUARDED_BY(mu_);
  size_t remaining_ GUARDED_BY(mu_) = 0;
  size_t outstanding_ GUARDED_BY(mu_) = 0;  // posted raw receives and verification jobs
  size_t tasks_ GUARDED_BY(mu_) = 0;  // tasks on the workers that have not returned (post_task)
  uint64_t next_request_ GUARDED_BY(mu_) = 0;
  uint64_t rx_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t blocks_ GUARDED_BY(mu_) = 0;
  Status failure_ GUARDED_BY(mu_);
  bool finished_ GUARDED_BY(mu_) = false;
  Clock::time_point started_;
};

}  // namespace longhaul::state::fetch
