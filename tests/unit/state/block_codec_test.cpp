#include "state/block_codec.hpp"

#include <gtest/gtest.h>

#include <random>

#include "state/block_hash.hpp"

namespace longhaul::state {
namespace {

TEST(BlockCodec, ZerosAreWorthCompressingRandomBytesAreNot) {
  std::vector<std::byte> zeros(kBlockBytes);
  EXPECT_TRUE(estimate_compressible(zeros));
  std::vector<std::byte> noise(kBlockBytes);
  std::mt19937_64 rng(3);
  for (auto& b : noise) b = static_cast<std::byte>(rng());
  EXPECT_FALSE(estimate_compressible(noise));
  // Dense f32 weights: too little redundancy to pay on a fast link.
  std::vector<float> weights(kBlockBytes / 4);
  std::normal_distribution<float> normal(0.f, 0.02f);
  for (auto& w : weights) w = normal(rng);
  EXPECT_FALSE(estimate_compressible(std::as_bytes(std::span(weights))));
  EXPECT_FALSE(estimate_compressible(std::span(zeros).first(100)))
      << "tiny blocks are never compressed";
}

TEST(BlockCodec, RoundTripsAndRefusesCorruptInput) {
  std::vector<std::byte> block(kBlockBytes);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<std::byte>(i % 7 == 0 ? i : 0);
  const auto z = compress_block(block);
  EXPECT_LT(z.size(), block.size() / 4);
  std::vector<std::byte> out(block.size());
  ASSERT_TRUE(decompress_block(z, out).is_ok());
  EXPECT_EQ(out, block);

  std::vector<std::byte> wrong_size(block.size() - 1);
  EXPECT_EQ(decompress_block(z, wrong_size).code(), LH_ERR_PROTOCOL);
  auto corrupt = z;
  corrupt.resize(corrupt.size() / 2);
  EXPECT_EQ(decompress_block(corrupt, out).code(), LH_ERR_PROTOCOL);
  std::vector<std::byte> garbage(64, std::byte{0x5A});
  EXPECT_EQ(decompress_block(garbage, out).code(), LH_ERR_PROTOCOL);
}

}  // namespace
}  // namespace longhaul::state
