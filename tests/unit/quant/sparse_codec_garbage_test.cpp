// The sparse decoder refuses malformed encodings and names what is wrong (one case per rule of the
// format), and the fuzz target's checks (fuzz/sparse_codec_fuzz.cpp, linked in) pass on random
// bytes, on valid encodings with random mutations, and on random encoder inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "quant/error_report.hpp"
#include "sparse_test_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace longhaul::quant::sparse {
namespace {

using testing::encode_ok;

// A valid encoding: chunk 16 (4 index bits, 6-bit entries), k 3, 40 elements (a short last chunk
// of 8). Record 0 starts at byte 24.
std::vector<std::byte> valid_encoding() {
  std::vector<float> in = gaussian_with_outliers(40, 0, 0, 9);
  std::vector<float> residual(in.size(), 0.0f);
  return encode_ok(in, residual, Params{.chunk = 16, .topk = 3, .decay = 0.95f});
}

void put(std::vector<std::byte>& b, std::size_t at, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}

// Rewrites entry j of record 0 (6 bits each, LSB first, from byte 28).
void put_entry(std::vector<std::byte>& b, std::size_t j, std::uint32_t index, std::uint32_t code) {
  const std::uint32_t e = index | (code << 4);
  for (std::uint32_t bit = 0; bit < 6; ++bit) {
    const std::size_t pos = 28 * 8 + j * 6 + bit;
    auto byte = std::to_integer<std::uint8_t>(b[pos / 8]);
    byte =
        static_cast<std::uint8_t>((byte & ~(1u << (pos % 8))) | (((e >> bit) & 1u) << (pos % 8)));
    b[pos / 8] = static_cast<std::byte>(byte);
  }
}

TEST(SparseCodec, MalformedEncodingsAreRefusedWithTheirReason) {
  const std::vector<std::byte> good = valid_encoding();
  ASSERT_TRUE(validate(good).is_ok());
  struct Case {
    const char* name;
    void (*mutate)(std::vector<std::byte>&);
    const char* says;
  };
  const Case cases[] = {
      {"magic", [](auto& b) { b[0] = std::byte{'X'}; }, "bad magic"},
      {"version", [](auto& b) { b[4] = std::byte{2}; }, "version 2"},
      {"reserved", [](auto& b) { b[7] = std::byte{1}; }, "reserved"},
      {"chunk 0", [](auto& b) { put(b, 8, 0, 4); }, "chunk 0 outside"},
      {"chunk too big", [](auto& b) { put(b, 8, 70000, 4); }, "chunk 70000 outside"},
      {"topk 0", [](auto& b) { put(b, 12, 0, 4); }, "topk 0 outside"},
      {"topk > chunk", [](auto& b) { put(b, 12, 17, 4); }, "topk 17 outside"},
      {"index bits", [](auto& b) { b[5] = std::byte{5}; }, "index bits 5 for chunk 16"},
      {"huge count", [](auto& b) { put(b, 16, ~std::uint64_t{0}, 8); }, "cannot fit"},
      {"short header", [](auto& b) { b.resize(10); }, "shorter than the 24-byte header"},
      {"truncated", [](auto& b) { b.pop_back(); }, "chunk 2"},
      {"trailing byte", [](auto& b) { b.push_back(std::byte{0}); }, "1 bytes after the last"},
      {"negative scale", [](auto& b) { b[25] |= std::byte{0x80}; }, "negative or not finite"},
      {"infinite scale", [](auto& b) { put(b, 24, 0x7F80, 2); }, "negative or not finite"},
      {"zero scale", [](auto& b) { put(b, 24, 0, 2); }, "zero iff empty"},
      {"too many", [](auto& b) { put(b, 26, 4, 2); }, "4 entries, more than"},
      {"unsorted", [](auto& b) { put_entry(b, 0, 9, 1), put_entry(b, 1, 3, 1); },
       "index 3 after 9"},
      {"duplicate", [](auto& b) { put_entry(b, 0, 5, 1), put_entry(b, 1, 5, 2); },
       "index 5 after 5"},
      {"padding", [](auto& b) { b[30] |= std::byte{0x80}; }, "padding bits"},
  };
  for (const Case& c : cases) {
    std::vector<std::byte> b = good;
    c.mutate(b);
    const Status s = validate(b);
    EXPECT_EQ(s.code(), LH_ERR_PROTOCOL) << c.name;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.name << ": " << s.message();
  }
}

TEST(SparseCodec, IndexBeyondAShortLastChunkIsRefused) {
  // 20 elements in chunks of 16: the last chunk has 4 elements, so its index 4..15 are outside.
  std::vector<float> in(20, 0.0f);
  in[19] = 1.0f;
  std::vector<float> residual(in.size(), 0.0f);
  std::vector<std::byte> b = encode_ok(in, residual, Params{.chunk = 16, .topk = 3, .decay = 1});
  ASSERT_TRUE(validate(b).is_ok());
  // Record 0 is empty (4 bytes, at 24), record 1 at 28: head, then one 6-bit entry (index 3).
  b[32] = static_cast<std::byte>((std::to_integer<std::uint8_t>(b[32]) & 0xF0) | 9);
  const Status s = validate(b);
  EXPECT_NE(s.message().find("index 9 outside its 4 elements"), std::string::npos) << s.message();
}

TEST(SparseCodec, DecodingGarbageIsRefusedAndTheFuzzChecksHold) {
  std::mt19937 rng(4848);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> input;
  // Random buffers, for both modes.
  for (int round = 0; round < 3000; ++round) {
    input.resize(1 + rng() % 300);
    for (auto& x : input) x = static_cast<std::uint8_t>(byte(rng));
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  // Valid encodings with one to three random byte or bit changes (decoder mode).
  std::size_t refused = 0, mutated = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<float> in = gaussian_with_outliers(1 + rng() % 200, 0.01, 30.0f, rng());
    std::vector<float> residual(in.size(), 0.0f);
    const Params p{.chunk = 1 + rng() % 64, .topk = 1 + rng() % 8, .decay = 0.95f};
    std::vector<std::byte> b = encode_ok(in, residual, p);
    const int changes = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < changes; ++c) {
      const std::size_t at = rng() % b.size();
      b[at] = (rng() & 1) ? static_cast<std::byte>(byte(rng))
                          : b[at] ^ static_cast<std::byte>(1u << (rng() % 8));
    }
    ++mutated;
    refused += validate(b).is_ok() ? 0 : 1;
    input.assign(1, 0);
    for (std::byte x : b) input.push_back(std::to_integer<std::uint8_t>(x));
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  // Most single changes break a rule; those that do not are changes of a value (a code, a scale).
  EXPECT_GT(refused, mutated / 4);
  std::printf("mutated encodings refused: %zu of %zu\n", refused, mutated);
}

}  // namespace
}  // namespace longhaul::quant::sparse
