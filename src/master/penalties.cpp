#include "master/penalties.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace longhaul::master {

std::string Penalties::identity(const std::string& host, uint16_t port, const std::string& node) {
  return node.empty() ? fmt::format("{}:{}", host, port)
                      : fmt::format("{}:{} ({})", host, port, node);
}

std::string Penalties::address_key(const std::string& source_host) {
  return fmt::format("address {}", source_host);
}

std::chrono::milliseconds Penalties::record(const std::string& key, Clock::time_point now,
                                            uint32_t free) {
  if (base_.count() <= 0) return std::chrono::milliseconds(0);
  forget_old(now);
  Record& r = records_[key];
  r.offences = std::min<uint32_t>(r.offences + 1, 32);
  if (r.offences <= free) {
    r.until = now;  // remembered (forget_old keeps it for `cap`), but refused for nothing yet
    return std::chrono::milliseconds(0);
  }
  auto backoff = base_;
  for (uint32_t i = free + 1; i < r.offences && backoff < cap_; ++i) backoff *= 2;
  backoff = std::min(backoff, cap_);
  r.until = now + backoff;
  return backoff;
}

std::chrono::milliseconds Penalties::refused_for(const std::string& identity,
                                                 Clock::time_point now) const {
  auto it = records_.find(identity);
  if (it == records_.end() || it->second.until <= now) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(it->second.until - now);
}

uint32_t Penalties::offences(const std::string& identity) const {
  auto it = records_.find(identity);
  return it == records_.end() ? 0 : it->second.offences;
}

// A record is kept for a cap past its back-off (a repeat offender's next back-off still doubles),
// and the table never holds more than kMaxRemembered identities.
void Penalties::forget_old(Clock::time_point now) {
  std::erase_if(records_, [&](const auto& kv) { return kv.second.until + cap_ < now; });
  while (records_.size() >= kMaxRemembered) {
    auto oldest = std::min_element(
        records_.begin(), records_.end(),
        [](const auto& a, const auto& b) { return a.second.until < b.second.until; });
    records_.erase(oldest);
  }
}

}  // namespace longhaul::master
