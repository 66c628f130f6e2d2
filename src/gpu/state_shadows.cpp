#include "gpu/state_shadows.hpp"

#include <algorithm>
#include <utility>

#include "gpu/hash_device.hpp"
#include "gpu/pinned_pool.hpp"
#include "state/block_hash.hpp"

namespace longhaul::gpu {

Result<std::shared_ptr<PinnedBuffer>> StateShadows::make(std::size_t bytes) {
  return acquire_pinned(bytes);
}

void StateShadows::keep(void* device, std::size_t bytes, std::shared_ptr<PinnedBuffer> shadow) {
  tensors_.push_back({device, bytes, std::move(shadow), {}});
}

Status StateShadows::pull() {
  for (Tensor& t : tensors_) LH_RETURN_IF_ERROR(pull(t));
  return Status::ok();
}

// Hashes the device tensor's blocks, then copies each run of blocks that changed in one copy.
Status StateShadows::pull(Tensor& t) {
  std::vector<std::uint64_t> now(state::block_count(t.bytes));
  LH_RETURN_IF_ERROR(hash_blocks_on_device(t.device, t.bytes, now));
  const std::vector<std::uint64_t> held = std::exchange(t.held, {});  // unknown until copied
  const bool known = held.size() == now.size();
  const auto unchanged = [&](std::size_t block) { return known && held[block] == now[block]; };
  std::byte* shadow = t.shadow->data();
  const auto* device = static_cast<const std::byte*>(t.device);
  for (std::size_t first = 0; first < now.size();) {
    if (unchanged(first)) {
      ++first;
      continue;
    }
    std::size_t end = first + 1;
    while (end < now.size() && !unchanged(end)) ++end;
    const std::size_t from = state::block_offset(first);
    const std::size_t bytes = std::min<std::size_t>(t.bytes, state::block_offset(end)) - from;
    LH_RETURN_IF_ERROR(copy_to_host(shadow + from, device + from, bytes));
    bytes_pulled_ += bytes;
    first = end;
  }
  t.held = std::move(now);
  return Status::ok();
}

Status StateShadows::push() {
  for (Tensor& t : tensors_) {
    t.held.clear();
    LH_RETURN_IF_ERROR(copy_to_device(t.device, t.shadow->data(), t.bytes));
    std::vector<std::uint64_t> now(state::block_count(t.bytes));
    LH_RETURN_IF_ERROR(hash_blocks_on_device(t.device, t.bytes, now));
    t.held = std::move(now);
  }
  return Status::ok();
}

Result<std::map<const std::byte*, std::vector<std::uint64_t>>> StateShadows::device_block_hashes()
    const {
  std::map<const std::byte*, std::vector<std::uint64_t>> out;
  for (const Tensor& t : tensors_) {
    std::vector<std::uint64_t> hashes(state::block_count(t.bytes));
    LH_RETURN_IF_ERROR(hash_blocks_on_device(t.device, t.bytes, hashes));
    out.emplace(t.shadow->data(), std::move(hashes));
  }
  return out;
}

}  // namespace longhaul::gpu
