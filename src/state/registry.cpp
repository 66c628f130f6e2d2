#include "state/registry.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "runtime/worker_pool.hpp"
#include "state/block_codec.hpp"
#include "state/block_hash.hpp"

namespace longhaul::state {

std::span<std::byte> Tensor::block(uint64_t index) const {
  return {data + block_offset(index), static_cast<size_t>(block_length(bytes, index))};
}

Status Registry::add_tensor(std::string name, void* data, uint64_t count, quant::DType dtype) {
  if (name.empty() || name.size() > kMaxTensorNameBytes)
    return invalid_argument(fmt::format("tensor name must be 1..{} bytes", kMaxTensorNameBytes));
  if (!quant::is_valid(dtype))
    return invalid_argument(
        fmt::format("tensor '{}': unknown dtype {}", name, static_cast<int>(dtype)));
  if (!data && count > 0) return invalid_argument(fmt::format("tensor '{}': NULL data", name));
  const uint64_t elem = quant::element_size(dtype);
  if (count > std::numeric_limits<uint64_t>::max() / elem / 2)
    return invalid_argument(fmt::format("tensor '{}': {} elements is too large", name, count));
  auto at = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const Tensor& t, const std::string& n) { return t.name < n; });
  if (at != tensors_.end() && at->name == name)
    return invalid_argument(fmt::format("tensor '{}' is already registered", name));
  Tensor t;
  t.name = std::move(name);
  t.data = static_cast<std::byte*>(data);
  t.count = count;
  t.dtype = dtype;
  t.bytes = count * elem;
  tensors_.insert(at, std::move(t));
  return Status::ok();
}

const Tensor* Registry::find(const std::string& name) const {
  auto at = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const Tensor& t, const std::string& n) { return t.name < n; });
  return at != tensors_.end() && at->name == name ? &*at : nullptr;
}

std::vector<TensorDigest> Registry::digest(runtime::WorkerPool& workers) const {
  std::vector<TensorDigest> out(tensors_.size());
  std::vector<std::pair<size_t, uint64_t>> blocks;  // (tensor, block), one parallel loop over all
  for (size_t t = 0; t < tensors_.size(); ++t) {
    const uint64_t n = block_count(tensors_[t].bytes);
    out[t].block_hashes.resize(n);
    out[t].compressible.assign((n + 7) / 8, 0);
    for (uint64_t b = 0; b < n; ++b) blocks.emplace_back(t, b);
  }
  std::vector<uint8_t> hint(blocks.size());
  workers.parallel_for(blocks.size(), [&](size_t i) {
    const auto [t, b] = blocks[i];
    const auto data = tensors_[t].block(b);
    out[t].block_hashes[b] = hash_block(data);
    hint[i] = estimate_compressible(data) ? 1 : 0;
  });
  for (size_t i = 0; i < blocks.size(); ++i)
    if (hint[i])
      out[blocks[i].first].compressible[blocks[i].second / 8] |=
          uint8_t(1u << (blocks[i].second % 8));
  for (size_t t = 0; t < tensors_.size(); ++t)
    out[t].hash = tensor_hash(tensors_[t].bytes, out[t].block_hashes);
  return out;
}

uint64_t Registry::hash(runtime::WorkerPool& workers, const KnownBlockHashes& known) const {
  std::vector<TensorSummary> summary;
  std::vector<uint64_t> hashes;
  for (const auto& t : tensors_) {
    const auto it = known.find(t.data);
    if (it == known.end()) hashes = hash_blocks({t.data, static_cast<size_t>(t.bytes)}, workers);
    const std::vector<uint64_t>& blocks = it == known.end() ? hashes : it->second;
    summary.push_back(
        {t.name, static_cast<uint8_t>(t.dtype), t.count, tensor_hash(t.bytes, blocks)});
  }
  return state_hash(summary);
}

}  // namespace longhaul::state
