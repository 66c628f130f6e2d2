#include "state/registry.hpp"

#include <gtest/gtest.h>

#include "runtime/worker_pool.hpp"
#include "state/block_hash.hpp"

namespace longhaul::state {
namespace {

TEST(Registry, TensorsAreKeptInNameOrderAndNamesAreUnique) {
  Registry r;
  std::vector<float> a(10), b(3);
  std::vector<int64_t> step(1);
  ASSERT_TRUE(r.add_tensor("w", a.data(), a.size(), quant::DType::kF32).is_ok());
  ASSERT_TRUE(r.add_tensor("b", b.data(), b.size(), quant::DType::kF32).is_ok());
  ASSERT_TRUE(r.add_tensor("step", step.data(), 1, quant::DType::kI64).is_ok());
  ASSERT_EQ(r.tensors().size(), 3u);
  EXPECT_EQ(r.tensors()[0].name, "b");
  EXPECT_EQ(r.tensors()[1].name, "step");
  EXPECT_EQ(r.tensors()[2].name, "w");
  EXPECT_EQ(r.tensors()[2].bytes, 40u);
  EXPECT_EQ(r.add_tensor("w", a.data(), 1, quant::DType::kF32).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.add_tensor("", a.data(), 1, quant::DType::kF32).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.add_tensor(std::string(kMaxTensorNameBytes + 1, 'n'), a.data(), 1, quant::DType::kF32)
                .code(),
            LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.add_tensor("x", nullptr, 1, quant::DType::kF32).code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.add_tensor("x", a.data(), 1, static_cast<quant::DType>(42)).code(),
            LH_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(r.add_tensor("empty", nullptr, 0, quant::DType::kF32).is_ok());
  ASSERT_NE(r.find("step"), nullptr);
  EXPECT_EQ(r.find("nope"), nullptr);
}

TEST(Registry, DigestAndHashFollowTheContent) {
  std::vector<float> big(3 * kBlockBytes / 4 + 5, 0.f);
  std::vector<uint8_t> small(100, 7);
  Registry r;
  ASSERT_TRUE(r.add_tensor("big", big.data(), big.size(), quant::DType::kF32).is_ok());
  ASSERT_TRUE(r.add_tensor("small", small.data(), small.size(), quant::DType::kU8).is_ok());
  runtime::WorkerPool workers;
  const auto d = r.digest(workers);
  ASSERT_EQ(d.size(), 2u);
  ASSERT_EQ(d[0].block_hashes.size(), 4u);
  EXPECT_EQ(d[0].compressible.size(), 1u);
  EXPECT_EQ(d[0].compressible[0] & 0x7, 0x7) << "zero blocks are marked compressible";
  EXPECT_EQ(d[1].block_hashes.size(), 1u);
  EXPECT_EQ(d[0].hash, tensor_hash(big.size() * 4, d[0].block_hashes));

  const uint64_t h = r.hash(workers);
  big[kBlockBytes / 4 + 3] = 1.f;  // block 1
  const auto d2 = r.digest(workers);
  EXPECT_NE(r.hash(workers), h);
  EXPECT_EQ(d2[0].block_hashes[0], d[0].block_hashes[0]);
  EXPECT_NE(d2[0].block_hashes[1], d[0].block_hashes[1]);
  EXPECT_EQ(d2[0].block_hashes[2], d[0].block_hashes[2]);
  big[kBlockBytes / 4 + 3] = 0.f;
  EXPECT_EQ(r.hash(workers), h);

  // Registration order does not matter.
  Registry other;
  ASSERT_TRUE(other.add_tensor("small", small.data(), small.size(), quant::DType::kU8).is_ok());
  ASSERT_TRUE(other.add_tensor("big", big.data(), big.size(), quant::DType::kF32).is_ok());
  EXPECT_EQ(other.hash(workers), h);
  r.set_revision(5);
  EXPECT_EQ(r.revision(), 5u);
  EXPECT_EQ(r.hash(workers), h) << "the revision is not content";
}

}  // namespace
}  // namespace longhaul::state
