// What the sources of a fetch send back (fetch.hpp): raw chunks received in place, compressed
// chunks, refusals and protocol violations, lost sources and failed links. Each chunk that
// arrives is verified (and decompressed) on the workers; a source that fails is dropped and its
// chunks go back to the queue.
#include <cstring>

#include <fmt/format.h>

#include "common/log.hpp"
#include "state/block_codec.hpp"
#include "state/block_hash.hpp"
#include "state/fetch.hpp"

namespace longhaul::state::fetch {

void Fetch::on_raw_received(size_t s, uint64_t request, Status st) {
  Actions actions;
  {
    MutexLock lock(mu_);
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

void Fetch::verify(size_t s, size_t chunk, std::vector<wire::CompressedBlock> compressed,
                   uint64_t compress_ns) {
  const Chunk& c = chunk_in_verification(chunk);
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
      bad = protocol_error(
          fmt::format("block {} of tensor '{}' arrived with the wrong hash", c.first + i, t.name));
  }
  Actions actions;
  {
    MutexLock lock(mu_);
    chunk_ended(s, c, bad.is_ok(), compress_ns,
                static_cast<uint64_t>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(decompressing).count()));
    if (!bad.is_ok()) {
      log::warn("state", "dropping source peer {}: {}", sources_[s].id, bad.to_string());
      if (sources_[s].link) actions.push_back([link = sources_[s].link, bad] { link->close(bad); });
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

void Fetch::on_control(size_t s, const std::vector<std::byte>& bytes) {
  auto message = wire::decode_control(bytes);
  Actions actions;
  {
    MutexLock lock(mu_);
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
      violation = protocol_error(fmt::format(
          "unexpected {} on a state link", wire::control_type_name(wire::control_type(*message))));
    }
    if (src.link) actions.push_back([link = src.link, violation] { link->close(violation); });
  }
  run(actions);
}

void Fetch::on_source_lost(uint64_t peer) {
  Actions actions;
  {
    MutexLock lock(mu_);
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

void Fetch::on_link_failed(size_t s, const Status& why) {
  Actions actions;
  {
    MutexLock lock(mu_);
    if (sources_[s].state != Source::State::kDead) drop_source(s, why);
    pump(actions);
    check_done();
  }
  run(actions);
}

void Fetch::drop_source(size_t s, const Status& why) {
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

}  // namespace longhaul::state::fetch
