#include "state/fetcher.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "common/log.hpp"
#include "net/endpoint.hpp"
#include "state/block_codec.hpp"
#include "state/block_hash.hpp"

namespace longhaul::state {
namespace {

using Clock = std::chrono::steady_clock;
using Actions = std::vector<std::function<void()>>;

void run(Actions& actions) {
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
        const wire::StatePlanMsg& plan)
      : io_(runtime.io()),
        workers_(runtime.workers()),
        options_(options),
        registry_(registry),
        stall_timer_(io_.context()) {
    std::map<uint64_t, size_t> index;
    for (const auto& s : plan.sources) {
      index[s.peer_id] = sources_.size();
      Source src;
      src.id = s.peer_id;
      src.host = s.host;
      src.port = s.port;
      src.zstd = ZstdChoice(options.zstd);
      sources_.push_back(std::move(src));
    }
    for (const auto& f : plan.fetches) {
      std::vector<size_t> holders;
      for (uint64_t id : f.sources) holders.push_back(index.at(id));
      for (size_t i = 0; i < f.blocks.size();) {
        Chunk c;
        c.tensor = f.tensor;
        c.first = f.blocks[i].index;
        c.compressible = f.blocks[i].compressible;
        c.sources = holders;
        const uint32_t limit =
            c.compressible ? wire::kMaxBlocksPerCompressedFetch : kRawChunkBlocks;
        while (i < f.blocks.size() && c.count < limit && f.blocks[i].index == c.first + c.count &&
               f.blocks[i].compressible == c.compressible) {
          c.hashes.push_back(f.blocks[i].hash);
          ++c.count;
          ++i;
        }
        queue_.push_back(chunks_.size());
        chunks_.push_back(std::move(c));
      }
    }
    remaining_ = chunks_.size();
    // Room for one probe's split per source and some: verification reads chunks_ outside the
    // lock, so the vector must never reallocate.
    chunks_.reserve(chunks_.size() + 4 * sources_.size());
  }

  Status run_to_end(LostSources* lost, FetchStats* stats) {
    started_ = Clock::now();
    if (lost)
      lost->listen([weak = weak_from_this()](uint64_t peer) {
        if (auto self = weak.lock()) self->on_source_lost(peer);
      });
    for (size_t s = 0; s < sources_.size(); ++s) connect(s);
    arm_stall_timer();
    std::unique_lock lock(mu_);
    done_cv_.wait(lock,
                  [this] { return (remaining_ == 0 || !failure_.is_ok()) && outstanding_ == 0; });
    finished_ = true;
    lock.unlock();
    if (lost) lost->stop_listening();
    lock.lock();
    // No task is posted from here on; the last ones may still be finishing their actions. Once
    // none is left nothing of this fetch runs on the shared pool, which is not ours to join.
    done_cv_.wait(lock, [this] { return tasks_ == 0; });
    Actions actions;
    for (auto& s : sources_)
      if (s.link)
        actions.push_back([link = s.link] { link->close(closed_error("the fetch is over")); });
    stats->rx_bytes = rx_bytes_;
    stats->blocks = blocks_;
    const auto now = Clock::now();
    for (const auto& s : sources_)
      if (s.zstd.compressible_chunks() > 0)
        log::debug("state",
                   "source peer {}: {} compressible chunks; raw {:.2f} GB/s, zstd {:.2f} GB/s",
                   s.id, s.zstd.compressible_chunks(), s.zstd.raw().bytes_per_second(now) / 1e9,
                   s.zstd.zstd_bytes_per_second() / 1e9);
    for (const auto& s : sources_) stats->sources += s.used ? 1 : 0;
    Status result = failure_;
    lock.unlock();
    asio::post(io_.context(), [self = shared_from_this()] { self->stall_timer_.cancel(); });
    run(actions);
    return result;
  }

 private:
  void connect(size_t s) {
    net::TransportOptions transport = options_.transport;
    transport.role = net::Role::kPeer;
    net::async_connect_link(io_, sources_[s].host, sources_[s].port, options_.connections_per_link,
                            transport,
                            [self = shared_from_this(), s](Result<std::shared_ptr<net::Link>> r) {
                              self->on_connected(s, std::move(r));
                            });
  }

  void on_connected(size_t s, Result<std::shared_ptr<net::Link>> r) {
    Actions actions;
    {
      std::lock_guard lock(mu_);
      if (!r) {
        if (sources_[s].state != Source::State::kDead)
          drop_source(
              s, r.status().with_context(fmt::format("cannot link to peer {}", sources_[s].id)));
      } else if (finished_ || !failure_.is_ok() || sources_[s].state == Source::State::kDead) {
        actions.push_back([link = *r] { link->close(closed_error("the fetch is over")); });
      } else {
        Source& src = sources_[s];
        src.link = *r;
        src.state = Source::State::kUp;
        src.last_progress = Clock::now();
        log::debug("state", "linked to source peer {} in {:.1f} ms", src.id,
                   std::chrono::duration<double, std::milli>(src.last_progress - started_).count());
        std::weak_ptr<Fetch> weak = weak_from_this();
        actions.push_back([weak, s, link = src.link, traffic = options_.traffic] {
          link->count_traffic(traffic);
          link->start(
              [weak, s](std::vector<std::byte> bytes) {
                if (auto self = weak.lock()) self->on_control(s, bytes);
              },
              [weak, s](const Status& why) {
                if (auto self = weak.lock()) self->on_link_failed(s, why);
              });
        });
      }
      pump(actions);
      check_done();
    }
    run(actions);
  }

  // Gives every live source with room the next chunks it holds; fails the fetch when a chunk has
  // no source left. Requires mu_.
  void pump(Actions& actions) {
    if (!failure_.is_ok() || finished_) return;
    for (size_t s = 0; s < sources_.size(); ++s) {
      Source& src = sources_[s];
      if (src.state != Source::State::kUp) continue;
      for (auto it = queue_.begin();
           it != queue_.end() && src.in_flight.size() < kChunksInFlight;) {
        const Chunk& c = chunks_[*it];
        if (std::find(c.sources.begin(), c.sources.end(), s) == c.sources.end() ||
            c.failed_at.contains(s)) {
          ++it;
          continue;
        }
        const size_t chunk = *it;
        it = queue_.erase(it);
        // A probe leaves the rest of its chunk to go next.
        if (auto rest = issue(s, chunk, actions)) it = queue_.insert(it, *rest);
      }
    }
    for (size_t id : queue_) {
      const Chunk& c = chunks_[id];
      bool hope = false;
      for (size_t s : c.sources)
        hope |= sources_[s].state != Source::State::kDead && !c.failed_at.contains(s);
      if (hope) continue;
      bool stalled = false;
      std::string why;
      for (size_t s : c.sources) {
        const Status& w = sources_[s].why;
        stalled |= w.code() == LH_ERR_TIMEOUT;
        why += fmt::format("; peer {}: {}", sources_[s].id,
                           w.is_ok() ? "sent a corrupt block" : w.message());
      }
      fail(Status(stalled ? LH_ERR_TIMEOUT : LH_ERR_PEER_LOST,
                  fmt::format("no source left for blocks {}..{} of tensor '{}'{}", c.first,
                              c.first + c.count - 1, registry_.tensors()[c.tensor].name, why)),
           actions);
      return;
    }
  }

  uint64_t chunk_bytes(const Chunk& c) const {
    const Tensor& t = registry_.tensors()[c.tensor];
    const uint64_t last = c.first + c.count - 1;
    return block_offset(last) + block_length(t.bytes, last) - block_offset(c.first);
  }

  // The chunk's request from `s` is over; it delivered its blocks when `delivered`. Requires mu_.
  // For a compressed chunk, the source's and this side's time (de)compressing it.
  void chunk_ended(size_t s, const Chunk& c, bool delivered, uint64_t compress_ns = 0,
                   uint64_t decompress_ns = 0) {
    const uint64_t bytes = delivered ? chunk_bytes(c) : 0;
    if (c.compressed)
      sources_[s].zstd.compressed_ended(bytes, compress_ns, decompress_ns);
    else
      sources_[s].zstd.raw().ended(Clock::now(), bytes);
  }

  // Cuts a queued chunk after its first block; returns the new chunk of the rest. Requires mu_
  // and room in chunks_ (it must not reallocate).
  size_t split_after_first_block(size_t chunk) {
    Chunk rest = chunks_[chunk];
    rest.first += 1;
    rest.count -= 1;
    rest.hashes.erase(rest.hashes.begin());
    chunks_[chunk].count = 1;
    chunks_[chunk].hashes.resize(1);
    chunks_.push_back(std::move(rest));
    ++remaining_;
    return chunks_.size() - 1;
  }

  // Requests the chunk from source s; returns the chunk made of the rest of its blocks when only
  // its first went out (a zstd probe).
  std::optional<size_t> issue(size_t s, size_t chunk, Actions& actions) {
    Source& src = sources_[s];
    std::optional<size_t> rest;
    if (chunks_[chunk].compressible && chunks_[chunk].count > 1 && src.zstd.probe_due() &&
        chunks_.size() < chunks_.capacity())
      rest = split_after_first_block(chunk);
    Chunk& c = chunks_[chunk];
    const uint64_t request = ++next_request_;
    const auto now = Clock::now();
    if (src.in_flight.empty()) src.last_progress = now;
    src.in_flight[request] = chunk;
    c.compressed = c.compressible && src.zstd.next_compressed(now);
    if (c.compressed)
      src.zstd.compressed_started();
    else
      src.zstd.raw().started(now);
    const auto fetch = wire::encode_control(
        wire::StateFetchMsg{request, c.tensor, c.first, c.count, c.compressed});
    if (c.compressed) {
      actions.push_back([link = src.link, fetch] { link->send_control(fetch); });
      return rest;
    }
    const Tensor& t = registry_.tensors()[c.tensor];
    const uint64_t begin = block_offset(c.first);
    const uint64_t last = c.first + c.count - 1;
    const uint64_t end = block_offset(last) + block_length(t.bytes, last);
    std::span<std::byte> dst{t.data + begin, static_cast<size_t>(end - begin)};
    ++outstanding_;
    actions.push_back([self = shared_from_this(), link = src.link, fetch, dst, request, s] {
      // The receive is posted before the request goes out, so every segment lands in place.
      link->recv(request, dst,
                 [self, s, request](Status st) { self->on_raw_received(s, request, st); });
      link->send_control(fetch);
    });
    return rest;
  }

  void on_raw_received(size_t s, uint64_t request, Status st) {
    Actions actions;
    {
      std::lock_guard lock(mu_);
      Source& src = sources_[s];
      auto it = src.in_flight.find(request);
      const size_t chunk = it->second;
      src.in_flight.erase(it);
      if (!st) {
        if (src.state != Source::State::kDead) drop_source(s, st);
        chunk_ended(s, chunks_[chunk], false);
        requeue(s, chunk);
        --outstanding_;
        pump(actions);
        check_done();
      } else {
        src.last_progress = Clock::now();
        rx_bytes_ += chunk_bytes(chunks_[chunk]);
        post_task([this, s, chunk] { verify(s, chunk, {}); });
      }
    }
    run(actions);
  }

  // Decompresses (when `compressed` holds the blocks; the source took compress_ns to compress
  // them) and checks every block of the chunk.
  void verify(size_t s, size_t chunk, std::vector<wire::CompressedBlock> compressed,
              uint64_t compress_ns = 0) {
    const Chunk& c = chunks_[chunk];
    const Tensor& t = registry_.tensors()[c.tensor];
    Status bad;
    Clock::duration decompressing{};
    for (uint32_t i = 0; i < c.count && bad.is_ok(); ++i) {
      const auto block = t.block(c.first + i);
      if (!compressed.empty()) {
        const auto& z = compressed[i];
        if (z.zstd) {
          const auto started = Clock::now();
          bad = decompress_block(z.bytes, block);
          decompressing += Clock::now() - started;
        } else if (z.bytes.size() != block.size()) {
          bad = protocol_error(fmt::format("a raw block of {} bytes where {} were expected",
                                           z.bytes.size(), block.size()));
        } else {
          std::memcpy(block.data(), z.bytes.data(), block.size());
        }
      }
      if (bad.is_ok() && hash_block(block) != c.hashes[i])
        bad = protocol_error(fmt::format("block {} of tensor '{}' arrived with the wrong hash",
                                         c.first + i, t.name));
    }
    Actions actions;
    {
      std::lock_guard lock(mu_);
      chunk_ended(s, c, bad.is_ok(), compress_ns,
                  static_cast<uint64_t>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(decompressing).count()));
      if (!bad.is_ok()) {
        log::warn("state", "dropping source peer {}: {}", sources_[s].id, bad.to_string());
        if (sources_[s].link)
          actions.push_back([link = sources_[s].link, bad] { link->close(bad); });
        if (sources_[s].state != Source::State::kDead) drop_source(s, bad);
        requeue(s, chunk);
      } else {
        sources_[s].used = true;
        blocks_ += c.count;
        --remaining_;
      }
      --outstanding_;
      pump(actions);
      check_done();
    }
    run(actions);
  }

  void on_control(size_t s, const std::vector<std::byte>& bytes) {
    auto message = wire::decode_control(bytes);
    Actions actions;
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      Source& src = sources_[s];
      Status violation;
      if (!message) {
        violation = message.status();
      } else if (auto* z = std::get_if<wire::StateBlocksZMsg>(&*message)) {
        auto it = src.in_flight.find(z->request);
        if (it == src.in_flight.end() || !chunks_[it->second].compressed ||
            z->blocks.size() != chunks_[it->second].count) {
          violation = protocol_error(
              fmt::format("STATE_BLOCKS_Z for request {} that does not match", z->request));
        } else {
          const size_t chunk = it->second;
          src.in_flight.erase(it);
          src.last_progress = Clock::now();
          for (const auto& b : z->blocks) rx_bytes_ += b.bytes.size();
          ++outstanding_;
          post_task([this, s, chunk, blocks = std::move(z->blocks),
                     compress_ns = z->compress_ns]() mutable {
            verify(s, chunk, std::move(blocks), compress_ns);
          });
          return;
        }
      } else if (auto* f = std::get_if<wire::StateFetchFailedMsg>(&*message)) {
        violation = Status(f->code, fmt::format("peer {} cannot serve: {}", src.id, f->reason));
      } else {
        violation =
            protocol_error(fmt::format("unexpected {} on a state link",
                                       wire::control_type_name(wire::control_type(*message))));
      }
      if (src.link) actions.push_back([link = src.link, violation] { link->close(violation); });
    }
    run(actions);
  }

  // The master lost this peer: drop it now (its link may never fail: a stopped process's kernel
  // keeps the sockets open). Closing the link fails its raw receives, which requeues their chunks.
  void on_source_lost(uint64_t peer) {
    Actions actions;
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      for (size_t s = 0; s < sources_.size(); ++s) {
        Source& src = sources_[s];
        if (src.id != peer || src.state == Source::State::kDead) continue;
        Status why = peer_lost(fmt::format("the master lost peer {}", peer));
        if (src.link) actions.push_back([link = src.link, why] { link->close(why); });
        drop_source(s, why);
      }
      pump(actions);
      check_done();
    }
    run(actions);
  }

  void on_link_failed(size_t s, const Status& why) {
    Actions actions;
    {
      std::lock_guard lock(mu_);
      if (sources_[s].state != Source::State::kDead) drop_source(s, why);
      pump(actions);
      check_done();
    }
    run(actions);
  }

  // Marks the source dead; its compressed requests go back to the queue at once (its raw ones
  // when their receives fail). Requires mu_.
  void drop_source(size_t s, const Status& why) {
    Source& src = sources_[s];
    src.state = Source::State::kDead;
    src.why = why;
    if (!finished_ && failure_.is_ok())
      log::warn("state", "source peer {} dropped: {}", src.id, why.to_string());
    for (auto it = src.in_flight.begin(); it != src.in_flight.end();) {
      if (chunks_[it->second].compressed) {
        chunk_ended(s, chunks_[it->second], false);
        requeue(s, it->second);
        it = src.in_flight.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Runs `task` on the runtime's workers, counted in tasks_ until it has returned; the task keeps
  // this fetch alive. Requires mu_.
  template <class Task>
  void post_task(Task task) {
    ++tasks_;
    workers_.post([self = shared_from_this(), task = std::move(task)]() mutable {
      task();
      std::lock_guard lock(self->mu_);
      if (--self->tasks_ == 0) self->done_cv_.notify_all();
    });
  }

  void requeue(size_t s, size_t chunk) {
    chunks_[chunk].failed_at.insert(s);
    queue_.push_front(chunk);
  }

  void fail(Status why, Actions& actions) {
    if (!failure_.is_ok()) return;
    failure_ = std::move(why);
    for (auto& src : sources_)
      if (src.link) actions.push_back([link = src.link, f = failure_] { link->close(f); });
  }

  void check_done() {
    if ((remaining_ == 0 || !failure_.is_ok()) && outstanding_ == 0) done_cv_.notify_all();
  }

  void arm_stall_timer() {
    stall_timer_.expires_after(std::chrono::seconds(1));
    stall_timer_.async_wait([weak = weak_from_this()](asio::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      Actions actions;
      {
        std::lock_guard lock(self->mu_);
        if (self->finished_) return;
        const auto now = Clock::now();
        for (auto& src : self->sources_) {
          if (src.state != Source::State::kUp || src.in_flight.empty()) continue;
          if (now - src.last_progress < self->options_.stall_timeout) continue;
          Status why = timeout_error(fmt::format(
              "no progress for {} ms",
              std::chrono::duration_cast<std::chrono::milliseconds>(self->options_.stall_timeout)
                  .count()));
          actions.push_back([link = src.link, why] { link->close(why); });
        }
      }
      run(actions);
      self->arm_stall_timer();
    });
  }

  net::IoRuntime& io_;
  runtime::WorkerPool& workers_;  // verifies (and decompresses) the chunks that arrive
  const FetchOptions options_;
  const Registry& registry_;
  asio::steady_timer stall_timer_;

  std::mutex mu_;
  std::condition_variable done_cv_;
  std::vector<Source> sources_;
  std::vector<Chunk> chunks_;
  std::deque<size_t> queue_;
  size_t remaining_ = 0;
  size_t outstanding_ = 0;  // posted raw receives and verification jobs
  size_t tasks_ = 0;        // tasks on the workers that have not returned (post_task)
  uint64_t next_request_ = 0;
  uint64_t rx_bytes_ = 0;
  uint64_t blocks_ = 0;
  Status failure_;
  bool finished_ = false;
  Clock::time_point started_;
};

}  // namespace

void LostSources::report(uint64_t peer_id) {
  std::lock_guard lock(mu_);
  lost_.push_back(peer_id);
  if (listener_) listener_(peer_id);
}

void LostSources::listen(Listener listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
  for (uint64_t peer : lost_) listener_(peer);
}

void LostSources::stop_listening() {
  std::lock_guard lock(mu_);
  listener_ = {};
}

Status fetch_blocks(runtime::Runtime& runtime, const FetchOptions& options,
                    const Registry& registry, const wire::StatePlanMsg& plan, LostSources* lost,
                    FetchStats* stats) {
  *stats = {};
  if (plan.fetches.empty()) return Status::ok();
  auto fetch = std::make_shared<Fetch>(runtime, options, registry, plan);
  return fetch->run_to_end(lost, stats);
}

}  // namespace longhaul::state
