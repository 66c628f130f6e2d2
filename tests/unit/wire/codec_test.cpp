#include "wire/codec.hpp"

#include <gtest/gtest.h>

namespace longhaul::wire {
namespace {

TEST(Codec, RoundTripsEveryPrimitive) {
  Writer w;
  w.u8(0xab);
  w.u16(0xbeef);
  w.u32(0xdeadbeef);
  w.u64(0x0123456789abcdefULL);
  w.i64(-42);
  w.f64(3.25);
  w.boolean(true);
  w.string("longhaul");
  const std::byte blob[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
  w.bytes(blob);
  Reader r(w.buffer());
  uint8_t a;
  uint16_t b;
  uint32_t c;
  uint64_t d;
  int64_t e;
  double f;
  bool g;
  std::string h;
  std::vector<std::byte> i;
  ASSERT_TRUE(r.u8(&a).is_ok());
  ASSERT_TRUE(r.u16(&b).is_ok());
  ASSERT_TRUE(r.u32(&c).is_ok());
  ASSERT_TRUE(r.u64(&d).is_ok());
  ASSERT_TRUE(r.i64(&e).is_ok());
  ASSERT_TRUE(r.f64(&f).is_ok());
  ASSERT_TRUE(r.boolean(&g).is_ok());
  ASSERT_TRUE(r.string(&h).is_ok());
  ASSERT_TRUE(r.bytes(&i).is_ok());
  EXPECT_TRUE(r.expect_end().is_ok());
  EXPECT_EQ(a, 0xab);
  EXPECT_EQ(b, 0xbeef);
  EXPECT_EQ(c, 0xdeadbeefu);
  EXPECT_EQ(d, 0x0123456789abcdefULL);
  EXPECT_EQ(e, -42);
  EXPECT_EQ(f, 3.25);
  EXPECT_TRUE(g);
  EXPECT_EQ(h, "longhaul");
  EXPECT_EQ(i, std::vector<std::byte>(std::begin(blob), std::end(blob)));
}

TEST(Codec, EncodesLittleEndian) {
  Writer w;
  w.u32(0x01020304);
  ASSERT_EQ(w.buffer().size(), 4u);
  EXPECT_EQ(w.buffer()[0], std::byte{4});
  EXPECT_EQ(w.buffer()[3], std::byte{1});
}

TEST(Codec, HostileLengthIsRejectedWithoutAllocating) {
  Writer w;
  w.u32(0xffffffff);  // claims 4 GiB follow
  w.u8(1);
  Reader r(w.buffer());
  std::vector<std::byte> out;
  Status s = r.bytes(&out);
  EXPECT_EQ(s.code(), LH_ERR_PROTOCOL);
  EXPECT_TRUE(out.empty());
}

TEST(Codec, TruncatedAndTrailingBytesAreErrors) {
  const std::byte two[2] = {};
  Reader r(two);
  uint32_t v;
  EXPECT_EQ(r.u32(&v).code(), LH_ERR_PROTOCOL);
  Reader r2(two);
  uint8_t b;
  ASSERT_TRUE(r2.u8(&b).is_ok());
  EXPECT_EQ(r2.expect_end().code(), LH_ERR_PROTOCOL);
}

TEST(Codec, CountIsBoundedByBytesLeft) {
  Writer w;
  w.u32(1000);
  w.u64(1);
  Reader r(w.buffer());
  uint32_t n;
  EXPECT_EQ(r.count(&n, 8).code(), LH_ERR_PROTOCOL);
}

TEST(Codec, InvalidBooleanIsAnError) {
  const std::byte two[1] = {std::byte{2}};
  Reader r(two);
  bool b;
  EXPECT_EQ(r.boolean(&b).code(), LH_ERR_PROTOCOL);
}

}  // namespace
}  // namespace longhaul::wire
