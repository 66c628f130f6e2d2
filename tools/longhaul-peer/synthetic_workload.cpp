#include "synthetic_workload.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace longhaul_peer {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: a cheap, well-spread hash
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A float in [-1, 1) with 24 significant bits, a function of the key only.
float unit(uint64_t key) {
  return static_cast<float>(static_cast<int64_t>(mix(key) >> 40) - (int64_t{1} << 23)) /
         static_cast<float>(1 << 23);
}

}  // namespace

SyntheticWorkload::SyntheticWorkload(const std::vector<size_t>& sizes, uint32_t inflight,
                                     uint64_t seed, size_t gather_bytes)
    : seed_(seed), gather_bytes_(gather_bytes) {
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> w(sizes[t]);
    for (size_t i = 0; i < w.size(); ++i) w[i] = unit(mix(seed_ ^ (t << 48)) + i);
    weights_.push_back(std::move(w));
    update_.emplace_back(sizes[t]);
    averaged_.emplace_back(sizes[t]);
  }
  for (size_t t = 0; t < sizes.size(); ++t) {
    const size_t n = sizes[t];
    const size_t parts = std::min<size_t>(inflight, n);
    for (size_t p = 0, begin = 0; p < parts; ++p) {
      const size_t end = n * (p + 1) / parts;
      slices_.push_back({update_[t].data() + begin, averaged_[t].data() + begin, end - begin});
      begin = end;
    }
  }
}

lh_status SyntheticWorkload::register_state(lh_state* state) {
  for (size_t t = 0; t < weights_.size(); ++t) {
    const std::string name = "weights." + std::to_string(t);
    if (lh_status s = lh_state_add_tensor(state, name.c_str(), weights_[t].data(),
                                          weights_[t].size(), LH_DTYPE_F32);
        s != LH_OK)
      return s;
  }
  if (gather_bytes_ > 0)
    if (lh_status s =
            lh_state_add_tensor(state, "allgather_digest", &gather_digest_, 1, LH_DTYPE_U64);
        s != LH_OK)
      return s;
  return lh_state_add_tensor(state, "updates_applied", &applied_, 1, LH_DTYPE_U64);
}

namespace {

// A record: the peer id and the step it is at (a newcomer's step is its own until its first
// sync), then bytes that follow from both.
constexpr size_t kRecordHeader = 16;

void write_record(uint64_t seed, uint64_t step, uint64_t peer_id, uint8_t* out, size_t bytes) {
  std::memcpy(out, &peer_id, 8);
  std::memcpy(out + 8, &step, 8);
  for (size_t i = kRecordHeader; i < bytes; ++i)
    out[i] = static_cast<uint8_t>(mix(seed ^ mix(step) ^ (mix(peer_id) << 1) ^ mix(i)));
}

}  // namespace

const std::vector<uint8_t>& SyntheticWorkload::record(uint64_t step, uint64_t peer_id) {
  record_.resize(gather_bytes_);
  write_record(seed_, step, peer_id, record_.data(), gather_bytes_);
  return record_;
}

std::vector<uint8_t>& SyntheticWorkload::gathered_for(size_t members) {
  gathered_.assign(members * gather_bytes_, 0);
  return gathered_;
}

bool SyntheticWorkload::check_and_fold(const std::vector<uint64_t>& ring) {
  if (gathered_.size() != ring.size() * gather_bytes_) return false;
  std::vector<uint8_t> expected(gather_bytes_);
  for (size_t r = 0; r < ring.size(); ++r) {
    const uint8_t* slot = gathered_.data() + r * gather_bytes_;
    uint64_t step = 0;
    std::memcpy(&step, slot + 8, 8);
    write_record(seed_, step, ring[r], expected.data(), gather_bytes_);
    if (std::memcmp(slot, expected.data(), gather_bytes_) != 0) return false;
  }
  for (uint8_t b : gathered_) gather_digest_ = mix(gather_digest_ ^ b);
  return true;
}

void SyntheticWorkload::make_update(uint64_t step, uint64_t peer_id) {
  for (size_t t = 0; t < update_.size(); ++t) {
    const uint64_t base = mix(seed_ ^ mix(step) ^ (mix(peer_id) << 1) ^ (t << 56));
    auto& u = update_[t];
    for (size_t i = 0; i < u.size(); ++i) u[i] = unit(base + i);
  }
}

void SyntheticWorkload::apply() {
  constexpr float kOuterLearningRate = 0.01f;
  for (size_t t = 0; t < weights_.size(); ++t) {
    auto& w = weights_[t];
    const auto& a = averaged_[t];
    for (size_t i = 0; i < w.size(); ++i) w[i] += kOuterLearningRate * a[i];
  }
  ++applied_;
}

size_t SyntheticWorkload::total_elements() const {
  size_t n = 0;
  for (const auto& w : weights_) n += w.size();
  return n;
}

}  // namespace longhaul_peer
