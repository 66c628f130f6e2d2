#include "state/fetcher.hpp"

#include <algorithm>
#include <memory>

#include <fmt/format.h>
#include <asio/post.hpp>

#include "common/log.hpp"
#include "net/endpoint.hpp"
#include "state/block_codec.hpp"
#include "state/block_hash.hpp"
#include "state/fetch.hpp"

namespace longhaul::state {
namespace fetch {

Fetch::Fetch(runtime::Runtime& runtime, const FetchOptions& options, const Registry& registry,
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
      const uint32_t limit = c.compressible ? wire::kMaxBlocksPerCompressedFetch : kRawChunkBlocks;
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

Status Fetch::run_to_end(LostSources* lost, FetchStats* stats) {
  started_ = Clock::now();
  if (lost)
    lost->listen([weak = weak_from_this()](uint64_t peer) {
      if (auto self = weak.lock()) self->on_source_lost(peer);
    });
  size_t source_count;
  {
    MutexLock lock(mu_);
    source_count = sources_.size();
  }
  for (size_t s = 0; s < source_count; ++s) connect(s);
  arm_stall_timer();
  MutexLock lock(mu_);
  while (!((remaining_ == 0 || !failure_.is_ok()) && outstanding_ == 0)) done_cv_.wait(mu_);
  finished_ = true;
  lock.unlock();
  if (lost) lost->stop_listening();
  lock.lock();
  // No task is posted from here on; the last ones may still be finishing their actions. Once
  // none is left nothing of this fetch runs on the shared pool, which is not ours to join.
  while (tasks_ > 0) done_cv_.wait(mu_);
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
                 "source peer {}: {} compressible chunks; raw {:.2f} GB/s, zstd {:.2f} GB/s", s.id,
                 s.zstd.compressible_chunks(), s.zstd.raw().bytes_per_second(now) / 1e9,
                 s.zstd.zstd_bytes_per_second() / 1e9);
  for (const auto& s : sources_) stats->sources += s.used ? 1 : 0;
  Status result = failure_;
  lock.unlock();
  asio::post(io_.context(), [self = shared_from_this()] { self->stall_timer_.cancel(); });
  run(actions);
  return result;
}

void Fetch::connect(size_t s) {
  net::TransportOptions transport = options_.transport;
  transport.role = net::Role::kPeer;
  std::string host;
  uint16_t port;
  {
    MutexLock lock(mu_);
    host = sources_[s].host;
    port = sources_[s].port;
  }
  net::async_connect_link(io_, host, port, options_.connections_per_link, transport,
                          [self = shared_from_this(), s](Result<std::shared_ptr<net::Link>> r) {
                            self->on_connected(s, std::move(r));
                          });
}

void Fetch::on_connected(size_t s, Result<std::shared_ptr<net::Link>> r) {
  Actions actions;
  {
    MutexLock lock(mu_);
    if (!r) {
      if (sources_[s].state != Source::State::kDead)
        drop_source(s,
                    r.status().with_context(fmt::format("cannot link to peer {}", sources_[s].id)));
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

void Fetch::pump(Actions& actions) {
  if (!failure_.is_ok() || finished_) return;
  for (size_t s = 0; s < sources_.size(); ++s) {
    Source& src = sources_[s];
    if (src.state != Source::State::kUp) continue;
    for (auto it = queue_.begin(); it != queue_.end() && src.in_flight.size() < kChunksInFlight;) {
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

uint64_t Fetch::chunk_bytes(const Chunk& c) const {
  const Tensor& t = registry_.tensors()[c.tensor];
  const uint64_t last = c.first + c.count - 1;
  return block_offset(last) + block_length(t.bytes, last) - block_offset(c.first);
}

void Fetch::chunk_ended(size_t s, const Chunk& c, bool delivered, uint64_t compress_ns,
                        uint64_t decompress_ns) {
  const uint64_t bytes = delivered ? chunk_bytes(c) : 0;
  if (c.compressed)
    sources_[s].zstd.compressed_ended(bytes, compress_ns, decompress_ns);
  else
    sources_[s].zstd.raw().ended(Clock::now(), bytes);
}

size_t Fetch::split_after_first_block(size_t chunk) {
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

std::optional<size_t> Fetch::issue(size_t s, size_t chunk, Actions& actions) {
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
  const auto fetch =
      wire::encode_control(wire::StateFetchMsg{request, c.tensor, c.first, c.count, c.compressed});
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

void Fetch::requeue(size_t s, size_t chunk) {
  chunks_[chunk].failed_at.insert(s);
  queue_.push_front(chunk);
}

void Fetch::fail(Status why, Actions& actions) {
  if (!failure_.is_ok()) return;
  failure_ = std::move(why);
  for (auto& src : sources_)
    if (src.link) actions.push_back([link = src.link, f = failure_] { link->close(f); });
}

void Fetch::check_done() {
  if ((remaining_ == 0 || !failure_.is_ok()) && outstanding_ == 0) done_cv_.notify_all();
}

void Fetch::arm_stall_timer() {
  stall_timer_.expires_after(std::chrono::seconds(1));
  stall_timer_.async_wait([weak = weak_from_this()](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    Actions actions;
    {
      MutexLock lock(self->mu_);
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

}  // namespace fetch

using fetch::Fetch;

void LostSources::report(uint64_t peer_id) {
  MutexLock lock(mu_);
  lost_.push_back(peer_id);
  if (listener_) listener_(peer_id);
}

void LostSources::listen(Listener listener) {
  MutexLock lock(mu_);
  listener_ = std::move(listener);
  for (uint64_t peer : lost_) listener_(peer);
}

void LostSources::stop_listening() {
  MutexLock lock(mu_);
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
