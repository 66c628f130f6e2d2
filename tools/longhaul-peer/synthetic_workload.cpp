#include "synthetic_workload.hpp"

#include <algorithm>
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
                                     uint64_t seed)
    : seed_(seed) {
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
  return lh_state_add_tensor(state, "updates_applied", &applied_, 1, LH_DTYPE_U64);
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
