// Which way a compressible chunk travels from one source: compressed or raw.
//
// zstd's fastest level compresses sparse or low-entropy floats at a few hundred MB/s per core:
// far faster than a WAN link, far slower than a 10 Gbit/s or loopback link. Compressing pays when
// both compressing (on the source) and decompressing (here) keep up with the link, since the link
// then carries fewer bytes for the same blocks. So, per source:
// - the link's rate is what raw chunks deliver: block bytes per second of the time the source had
//   raw chunks in flight (every raw chunk counts, compressible or not; queueing behind other
//   chunks only adds to that busy time);
// - zstd's rate is the slower of the source's compression (STATE_BLOCKS_Z reports its time) and
//   this side's decompression, per thread: block bytes per second of compute.
// The first compressible block travels compressed (a probe of zstd's rate), then chunks go raw
// until a raw chunk and the probe have delivered; from then on each takes the faster way. While
// raw wins nothing is re-probed: raw chunks keep measuring the link, and zstd's rate is a property
// of the data and the CPUs. While zstd wins by less than kNoRawReprobeAbove, the 8th compressible
// chunk goes raw, then one 16, 32, 64, ... chunks later, so that a faster link is noticed; with a
// wider margin the link would have to get that much faster to change the answer, and a raw chunk
// costs a slow link several compressed chunks' time. Not thread-safe: the fetcher holds its lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace longhaul::state {

// kAuto: as above. kNever / kAlways: always raw / always compressed (the references kAuto is
// measured against).
enum class ZstdPolicy { kAuto, kNever, kAlways };

inline constexpr uint64_t kFirstRawReprobe = 8;
inline constexpr double kNoRawReprobeAbove = 2.0;

// Block bytes per second of the time some chunk of one way was in flight.
class BusyRate {
 public:
  using Clock = std::chrono::steady_clock;

  void started(Clock::time_point now);
  // A chunk ended: delivered (verified) `bytes`, or 0 when it failed.
  void ended(Clock::time_point now, uint64_t bytes);
  bool tried() const { return in_flight_ > 0 || delivered_ > 0; }
  bool measured() const { return delivered_ > 0; }
  double bytes_per_second(Clock::time_point now) const;

 private:
  size_t in_flight_ = 0;
  uint64_t delivered_ = 0;
  uint64_t bytes_ = 0;
  Clock::duration busy_{};
  Clock::time_point busy_since_;
};

class ZstdChoice {
 public:
  using Clock = BusyRate::Clock;

  explicit ZstdChoice(ZstdPolicy policy = ZstdPolicy::kAuto) : policy_(policy) {}

  // Whether the next compressible chunk travels compressed.
  bool next_compressed(Clock::time_point now);
  // Whether that chunk would be the probe of zstd's rate (auto, nothing compressed measured or in
  // flight): the fetcher sends one block of it compressed, the smallest probe that measures.
  bool probe_due() const {
    return policy_ == ZstdPolicy::kAuto && compressed_bytes_ == 0 && compressed_in_flight_ == 0;
  }

  // Raw chunks, compressible or not, start and end through raw().
  BusyRate& raw() { return raw_; }
  const BusyRate& raw() const { return raw_; }
  void compressed_started() { ++compressed_in_flight_; }
  // A compressed chunk of `bytes` block bytes was compressed by the source in compress_ns and
  // decompressed here in decompress_ns (on one thread each); bytes == 0: it failed.
  void compressed_ended(uint64_t bytes, uint64_t compress_ns, uint64_t decompress_ns);

  // Block bytes per second of the slower of compression and decompression; 0 until measured.
  double zstd_bytes_per_second() const;
  uint64_t compressible_chunks() const { return compressible_; }

 private:
  ZstdPolicy policy_;
  uint64_t compressible_ = 0;
  uint64_t next_raw_reprobe_ = kFirstRawReprobe;
  uint64_t raw_reprobe_gap_ = kFirstRawReprobe;
  BusyRate raw_;
  size_t compressed_in_flight_ = 0;
  uint64_t compressed_bytes_ = 0;
  uint64_t compress_ns_ = 0;
  uint64_t decompress_ns_ = 0;
};

}  // namespace longhaul::state
