// The trainer's step in two halves (a data-parallel peer averages the gradients between them)
// is the same step: compute_gradients + apply_gradients leave parameters, moments and counters
// bit-identical to step(), and gradients replaced between the halves are the ones applied.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "train/trainer.hpp"

namespace longhaul::train {
namespace {

TrainOptions small_options() {
  TrainOptions o;
  o.model = GptConfig{256, 16, 2, 32, 4};
  o.batch = 3;
  o.schedule = LrSchedule{2e-3f, 2e-4f, 2, 8};
  return o;
}

std::vector<std::uint8_t> text() {
  std::vector<std::uint8_t> t(4000);
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i] = static_cast<std::uint8_t>("the quick brown fox\n"[i % 20]);
  return t;
}

template <class A, class B>
bool bitwise_equal(const A& a, const B& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::memcmp(&x, &y, sizeof(float)) == 0;
         });
}

TEST(trainTrainer, ComputeThenApplyGradientsIsExactlyOneStep) {
  const std::vector<std::uint8_t> data = text();
  Result<Trainer> whole = Trainer::create(small_options());
  Result<Trainer> halves = Trainer::create(small_options());
  ASSERT_TRUE(whole.is_ok() && halves.is_ok());
  for (int i = 0; i < 4; ++i) {
    Result<StepStats> a = whole->step(data);
    ASSERT_TRUE(a.is_ok());
    Result<float> loss = halves->compute_gradients(data);
    ASSERT_TRUE(loss.is_ok());
    const StepStats b = halves->apply_gradients();
    EXPECT_EQ(std::memcmp(&a->loss, &b.loss, sizeof(float)), 0);
    EXPECT_EQ(*loss, b.loss);
    EXPECT_EQ(a->grad_norm, b.grad_norm);
    EXPECT_EQ(a->lr, b.lr);
  }
  EXPECT_TRUE(bitwise_equal(whole->model().params(), halves->model().params()));
  EXPECT_TRUE(bitwise_equal(whole->optimizer().m(), halves->optimizer().m()));
  EXPECT_TRUE(bitwise_equal(whole->optimizer().v(), halves->optimizer().v()));
  EXPECT_EQ(whole->step_count(), halves->step_count());
  EXPECT_EQ(whole->data_index(), halves->data_index());
}

// What a data-parallel peer does: the group's average replaces its own gradients before they are
// clipped and applied, so peers holding the same parameters and the same average stay identical.
TEST(trainTrainer, GradientsReplacedBetweenTheHalvesAreTheOnesApplied) {
  const std::vector<std::uint8_t> data = text();
  Result<Trainer> other_peer = Trainer::create(small_options());
  Result<Trainer> peer = Trainer::create(small_options());
  Result<Trainer> own = Trainer::create(small_options());
  ASSERT_TRUE(other_peer.is_ok() && peer.is_ok() && own.is_ok());
  ASSERT_TRUE(other_peer->compute_gradients(data).is_ok());
  Result<Batch> batch = train_batch(data, 3, 16, 99, 5);
  ASSERT_TRUE(batch.is_ok());
  ASSERT_TRUE(peer->compute_gradients(*batch).is_ok());
  ASSERT_TRUE(own->compute_gradients(*batch).is_ok());
  std::copy(other_peer->model().grads().begin(), other_peer->model().grads().end(),
            peer->model().grads().begin());
  other_peer->apply_gradients();
  peer->apply_gradients();
  own->apply_gradients();
  EXPECT_TRUE(bitwise_equal(other_peer->model().params(), peer->model().params()));
  EXPECT_FALSE(bitwise_equal(own->model().params(), peer->model().params()));
}

}  // namespace
}  // namespace longhaul::train
