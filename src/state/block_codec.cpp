#include "state/block_codec.hpp"

#include <fmt/format.h>
#include <zstd.h>

namespace longhaul::state {
namespace {

constexpr size_t kSampleBytes = 1024;
constexpr int kLevel = 1;

// One compression context per thread: creating one costs more than compressing a sample.
ZSTD_CCtx* cctx() {
  struct Holder {
    ZSTD_CCtx* ctx = ZSTD_createCCtx();
    ~Holder() { ZSTD_freeCCtx(ctx); }
  };
  thread_local Holder h;
  return h.ctx;
}

ZSTD_DCtx* dctx() {
  struct Holder {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    ~Holder() { ZSTD_freeDCtx(ctx); }
  };
  thread_local Holder h;
  return h.ctx;
}

size_t sample_compressed(std::span<const std::byte> sample) {
  std::byte out[ZSTD_COMPRESSBOUND(kSampleBytes)];
  const size_t n =
      ZSTD_compressCCtx(cctx(), out, sizeof(out), sample.data(), sample.size(), kLevel);
  return ZSTD_isError(n) ? sample.size() : n;
}

}  // namespace

bool estimate_compressible(std::span<const std::byte> block) {
  if (block.size() < 4 * kSampleBytes) return false;  // not worth a header and a round of work
  const auto head = block.subspan(0, kSampleBytes);
  const auto middle = block.subspan(block.size() / 2, kSampleBytes);
  return 2 * (sample_compressed(head) + sample_compressed(middle)) < 2 * kSampleBytes;
}

std::vector<std::byte> compress_block(std::span<const std::byte> block) {
  std::vector<std::byte> out(ZSTD_compressBound(block.size()));
  const size_t n =
      ZSTD_compressCCtx(cctx(), out.data(), out.size(), block.data(), block.size(), kLevel);
  if (ZSTD_isError(n)) {  // cannot happen with a bound-sized buffer; keep the data intact anyway
    out.assign(block.begin(), block.end());
    return out;
  }
  out.resize(n);
  return out;
}

Status decompress_block(std::span<const std::byte> compressed, std::span<std::byte> out) {
  const unsigned long long size = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size != out.size())
    return protocol_error(
        fmt::format("a compressed block does not decode to the expected {} bytes", out.size()));
  const size_t n =
      ZSTD_decompressDCtx(dctx(), out.data(), out.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n) || n != out.size())
    return protocol_error(fmt::format("corrupt compressed block: {}",
                                      ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short output"));
  return Status::ok();
}

}  // namespace longhaul::state
