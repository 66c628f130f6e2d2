// A peer's registry of named tensors: pointers into the caller's memory, a revision, and the
// digest (block hashes, compressibility hints) that a sync reports to the master.
//
// Not thread-safe: one sync or hash at a time, and no registration while one runs.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "quant/dtype.hpp"

namespace longhaul::runtime {
class WorkerPool;
}

namespace longhaul::state {

inline constexpr uint32_t kMaxTensorNameBytes = 1024;

struct Tensor {
  std::string name;
  std::byte* data = nullptr;
  uint64_t count = 0;
  quant::DType dtype = quant::DType::kF32;
  uint64_t bytes = 0;

  std::span<std::byte> block(uint64_t index) const;
};

struct TensorDigest {
  std::vector<uint64_t> block_hashes;
  uint64_t hash = 0;                  // tensor_hash(bytes, block_hashes)
  std::vector<uint8_t> compressible;  // bitmap, one bit per block (LSB first)
};

class Registry {
 public:
  Status add_tensor(std::string name, void* data, uint64_t count, quant::DType dtype);

  // In ascending name order; index i here is tensor i of the protocol.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find(const std::string& name) const;

  uint64_t revision() const { return revision_; }
  void set_revision(uint64_t r) { revision_ = r; }

  // Hashes every block of every tensor (in parallel over all blocks of all tensors, on `workers`
  // and the calling thread) and estimates each block's compressibility.
  std::vector<TensorDigest> digest(runtime::WorkerPool& workers) const;
  // The state hash (block_hash.hpp) of the current content, hashed on `workers` and the caller.
  // `known`: block hashes taken elsewhere (the GPU's, of device tensors), by tensor data address;
  // those tensors' bytes are not read.
  using KnownBlockHashes = std::map<const std::byte*, std::vector<uint64_t>>;
  uint64_t hash(runtime::WorkerPool& workers, const KnownBlockHashes& known = {}) const;

 private:
  std::vector<Tensor> tensors_;
  uint64_t revision_ = 0;
};

}  // namespace longhaul::state
