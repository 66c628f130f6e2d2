#include "state/block_server.hpp"

#include <chrono>

#include <fmt/format.h>

#include "common/log.hpp"
#include "state/block_codec.hpp"
#include "state/block_hash.hpp"

namespace longhaul::state {

BlockServer::BlockServer(runtime::WorkerPool& workers, std::shared_ptr<net::TrafficCounter> traffic)
    : workers_(workers), traffic_(std::move(traffic)) {}

BlockServer::~BlockServer() {
  // Every compression and send has ended by now (each holds a reference); this closes the links
  // still open. The shared pool is not this server's to join.
  (void)end();
}

Status BlockServer::begin(const Registry& registry) {
  MutexLock lock(mu_);
  if (registry_) return invalid_argument("another lh_sync_state is running on this communicator");
  registry_ = &registry;
  tx_bytes_ = 0;
  return Status::ok();
}

uint64_t BlockServer::end() {
  std::map<const net::Link*, std::shared_ptr<net::Link>> links;
  {
    MutexLock lock(mu_);
    registry_ = nullptr;
    links.swap(links_);
  }
  // Fetchers close their links when done; whatever is still open belongs to a finished sync.
  for (auto& [raw, link] : links) link->close(closed_error("the state sync is over"));
  MutexLock lock(mu_);
  while (in_flight_ > 0) idle_.wait(mu_);
  return tx_bytes_;
}

void BlockServer::on_service_message(const std::shared_ptr<net::Link>& link,
                                     Result<wire::ControlMessage> message) {
  // The mesh leaves a service link's traffic to the service; the first call counts the fetch that
  // made it one (and anything before it), later calls change nothing.
  link->count_traffic(traffic_);
  if (!message) {
    MutexLock lock(mu_);
    links_.erase(link.get());
    if (message.status().code() == LH_ERR_PROTOCOL) link->close(message.status());
    return;
  }
  auto* fetch = std::get_if<wire::StateFetchMsg>(&*message);
  if (!fetch) {
    Status why = protocol_error(fmt::format("unexpected {} on a state link",
                                            wire::control_type_name(wire::control_type(*message))));
    log::warn("state", "closing state link from {}: {}", link->peer(), why.to_string());
    link->close(why);
    return;
  }
  serve(link, *fetch);
}

// The refusal is the link's last message: a fetcher drops a source that refuses (an honest one
// closes the link itself on reading it), so only one that ignores refusals would keep it open.
void BlockServer::refuse(const std::shared_ptr<net::Link>& link, uint64_t request, Status why) {
  log::debug("state", "refusing a fetch from {}: {}", link->peer(), why.to_string());
  link->send_control(wire::encode_control(wire::StateFetchFailedMsg{
                         request, why.code(), why.message().substr(0, wire::kMaxReasonBytes)}),
                     [link, why](Status) { link->close(why); });
}

void BlockServer::sent(uint64_t bytes, const Status& s) {
  MutexLock lock(mu_);
  if (s) tx_bytes_ += bytes;
  if (--in_flight_ == 0) idle_.notify_all();
}

void BlockServer::serve(const std::shared_ptr<net::Link>& link, const wire::StateFetchMsg& fetch) {
  MutexLock lock(mu_);
  if (!registry_) {
    lock.unlock();
    return refuse(link, fetch.request, aborted_error("this peer is not in a state sync"));
  }
  links_.emplace(link.get(), link);
  const auto& tensors = registry_->tensors();
  if (fetch.tensor >= tensors.size() ||
      uint64_t{fetch.first_block} + fetch.block_count > block_count(tensors[fetch.tensor].bytes)) {
    lock.unlock();
    return refuse(link, fetch.request,
                  invalid_argument(
                      fmt::format("blocks {}..{} of tensor {} do not exist here", fetch.first_block,
                                  fetch.first_block + fetch.block_count, fetch.tensor)));
  }
  const Tensor tensor = tensors[fetch.tensor];
  ++in_flight_;
  lock.unlock();
  auto self = shared_from_this();
  if (!fetch.compressed) {
    // Raw: one DATA op straight from the tensor, striped over the link's connections.
    const uint64_t begin = block_offset(fetch.first_block);
    const uint64_t last = fetch.first_block + fetch.block_count - 1;
    const uint64_t end = block_offset(last) + block_length(tensor.bytes, last);
    link->send(fetch.request, {tensor.data + begin, static_cast<size_t>(end - begin)},
               [self, bytes = end - begin](Status s) { self->sent(bytes, s); });
    return;
  }
  workers_.post([self, link, fetch, tensor] {
    wire::StateBlocksZMsg answer;
    answer.request = fetch.request;
    uint64_t bytes = 0;
    const auto started = std::chrono::steady_clock::now();
    for (uint32_t b = fetch.first_block; b < fetch.first_block + fetch.block_count; ++b) {
      const auto raw = tensor.block(b);
      wire::CompressedBlock block;
      block.bytes = compress_block(raw);
      block.zstd = block.bytes.size() < raw.size();
      if (!block.zstd) block.bytes.assign(raw.begin(), raw.end());
      bytes += block.bytes.size();
      answer.blocks.push_back(std::move(block));
    }
    answer.compress_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::steady_clock::now() - started)
                                                   .count());
    link->send_control(wire::encode_control(answer),
                       [self, bytes](Status s) { self->sent(bytes, s); });
  });
}

}  // namespace longhaul::state
