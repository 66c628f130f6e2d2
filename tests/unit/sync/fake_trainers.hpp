// Trainers of a fake group (tests/support/fake_group.hpp): one per member, each with parameters in
// kRanges ranges, a toy inner step that pulls them towards its own target, and its sync engine
// over the member's ports. Phases of steps run on one thread per trainer, as separate processes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "fake_group.hpp"
#include "sync/engine.hpp"

namespace longhaul::sync::testing {

using longhaul::testing::FakeMember;
using longhaul::testing::FakeWorld;
using longhaul::testing::in_parallel;
using peer::PeerId;

inline constexpr size_t kRanges = 4, kPerRange = 16;

struct Trainer {
  FakeMember* member = nullptr;
  float target = 0.0f;  // where its inner steps pull its parameters
  std::vector<std::vector<float>> params;
  std::unique_ptr<SyncEngine> engine;
  Status status;  // the first error of start or step
  bool stopped = false;

  Trainer(FakeMember* m, float initial, float target_value) : member(m), target(target_value) {
    params.assign(kRanges, std::vector<float>(kPerRange, initial));
  }
  void inner_step() {
    for (auto& range : params)
      for (size_t j = 0; j < range.size(); ++j)
        range[j] += 0.25f * (target + 0.01f * static_cast<float>(j) - range[j]);
  }
  std::vector<float> flat() const {
    std::vector<float> out;
    for (const auto& r : params) out.insert(out.end(), r.begin(), r.end());
    return out;
  }
};

// DiLoCo with the outer step θ_g ← θ_g − avg Δ (lr 1, no momentum): θ_g becomes the mean of the
// members' parameters, which a test can compute.
inline EngineOptions options(uint32_t sync_every, uint32_t fragments = 1, uint32_t delay = 0,
                             Method method = Method::kDiLoCo) {
  EngineOptions o;
  o.sync_every = sync_every;
  o.fragments = fragments;
  o.delay = delay;
  o.method = method;
  if (method == Method::kDiLoCo) o.nesterov = {1.0f, 0.0f};
  return o;
}

inline Status start(Trainer& t, EngineOptions o) {
  o.ranges.clear();
  for (auto& r : t.params) o.ranges.push_back({r.data(), r.size(), quant::DType::kF32, false});
  EngineServices services{t.member, t.member, t.member, &t.member->workers(), nullptr};
  auto engine = SyncEngine::start(services, std::move(o));
  if (!engine) return t.status = engine.status();
  t.engine = std::move(*engine);
  return Status::ok();
}

// Trainers for the first `n` members, member i starting at initial[i], pulled towards i + 1.
inline std::vector<Trainer> trainers(const std::vector<FakeMember*>& m,
                                     const std::vector<float>& initial) {
  std::vector<Trainer> t;
  for (size_t i = 0; i < m.size(); ++i) t.emplace_back(m[i], initial[i], static_cast<float>(i + 1));
  return t;
}

inline void start_all(std::vector<Trainer>& t, const EngineOptions& o) {
  in_parallel(t.size(), [&](size_t i) { EXPECT_TRUE(start(t[i], o)) << t[i].status.to_string(); });
}

// Called before trainer i's engine step `step`, after its inner step; false stops the trainer.
using BeforeStep = std::function<bool(size_t i, uint64_t step, Trainer& t)>;

// Steps every trainer still running from its next step to `last`, each on its own thread.
inline void run_until(std::vector<Trainer*> t, uint64_t last, const BeforeStep& before = {}) {
  in_parallel(t.size(), [&](size_t i) {
    Trainer& tr = *t[i];
    if (tr.stopped || !tr.engine) return;
    for (uint64_t step = tr.engine->step_count() + 1; step <= last; ++step) {
      tr.inner_step();
      if (before && !before(i, step, tr)) {
        tr.stopped = true;
        return;
      }
      if (Status s = tr.engine->step(); !s) {
        tr.status = s;
        tr.stopped = true;
        return;
      }
    }
  });
}

inline void run_until(std::vector<Trainer>& t, uint64_t last, const BeforeStep& before = {}) {
  std::vector<Trainer*> all;
  for (auto& tr : t) all.push_back(&tr);
  run_until(all, last, before);
}

// close() on every trainer at once: each settles its round in flight with the group.
inline void close_all(std::vector<Trainer>& t) {
  in_parallel(t.size(), [&](size_t i) { EXPECT_TRUE(t[i].engine->close()); });
}

// Every listed trainer holds the same shared state, bit for bit.
inline void expect_identical(std::vector<Trainer*> t) {
  ASSERT_FALSE(t.empty());
  const uint64_t h = t[0]->engine->state_hash();
  for (size_t i = 1; i < t.size(); ++i)
    EXPECT_EQ(t[i]->engine->state_hash(), h) << "trainer " << i << " diverged";
  for (size_t f = 0; f < t[0]->engine->layout().fragments(); ++f) {
    auto a = t[0]->engine->theta_g(f);
    for (size_t i = 1; i < t.size(); ++i) {
      auto b = t[i]->engine->theta_g(f);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    }
  }
}

inline void expect_identical(std::vector<Trainer>& t) {
  std::vector<Trainer*> all;
  for (auto& tr : t) all.push_back(&tr);
  expect_identical(all);
}

inline bool all_finite(std::span<const float> v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace longhaul::sync::testing
