#include "state/zstd_choice.hpp"

#include <algorithm>

namespace longhaul::state {

void BusyRate::started(Clock::time_point now) {
  if (in_flight_++ == 0) busy_since_ = now;
}

void BusyRate::ended(Clock::time_point now, uint64_t bytes) {
  if (--in_flight_ == 0) busy_ += now - busy_since_;
  if (bytes == 0) return;
  bytes_ += bytes;
  ++delivered_;
}

double BusyRate::bytes_per_second(Clock::time_point now) const {
  const auto busy = busy_ + (in_flight_ > 0 ? now - busy_since_ : Clock::duration{});
  const double seconds = std::chrono::duration<double>(busy).count();
  return seconds > 0 ? static_cast<double>(bytes_) / seconds : 0.0;
}

void ZstdChoice::compressed_ended(uint64_t bytes, uint64_t compress_ns, uint64_t decompress_ns) {
  --compressed_in_flight_;
  if (bytes == 0) return;
  compressed_bytes_ += bytes;
  // A chunk measured at 0 ns (a coarse clock) still counts as some time.
  compress_ns_ += std::max<uint64_t>(compress_ns, 1);
  decompress_ns_ += std::max<uint64_t>(decompress_ns, 1);
}

double ZstdChoice::zstd_bytes_per_second() const {
  if (compressed_bytes_ == 0) return 0.0;
  const double slower_ns = static_cast<double>(std::max(compress_ns_, decompress_ns_));
  return static_cast<double>(compressed_bytes_) / (slower_ns * 1e-9);
}

bool ZstdChoice::next_compressed(Clock::time_point now) {
  const uint64_t n = compressible_++;
  switch (policy_) {
    case ZstdPolicy::kNever:
      return false;
    case ZstdPolicy::kAlways:
      return true;
    case ZstdPolicy::kAuto:
      break;
  }
  if (probe_due()) return true;
  if (compressed_bytes_ == 0 || !raw_.measured()) return false;
  const double zstd = zstd_bytes_per_second(), link = raw_.bytes_per_second(now);
  if (zstd <= link) return false;
  if (zstd >= kNoRawReprobeAbove * link || n < next_raw_reprobe_) return true;
  raw_reprobe_gap_ *= 2;
  next_raw_reprobe_ = n + raw_reprobe_gap_;
  return false;
}

}  // namespace longhaul::state
