// Finite-difference gradient checks for the trainer's kernels. A kernel's backward is checked by
// reducing its output to a scalar loss = sum(out * probe) with a fixed random probe (so dout =
// probe) and comparing the analytic gradient with central differences of that loss, evaluated
// in double from the float outputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "train/rng.hpp"

namespace longhaul::train::testing {

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0,
                                        double mean = 0.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(mean + scale * rng.normal());
  return v;
}

inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& probe) {
  double s = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * probe[i];
  return s;
}

struct Tolerance {
  double eps = 1e-2;   // finite-difference step
  double atol = 1e-3;  // |analytic - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-2;
};

// Compares analytic[i] with (loss(x[i] + eps) - loss(x[i] - eps)) / 2 eps for every element (or
// `samples` evenly spread ones when samples > 0). x is restored afterwards.
inline void expect_gradient(const std::string& what, std::vector<float>& x,
                            const std::vector<float>& analytic, const std::function<double()>& loss,
                            Tolerance tol, std::size_t samples = 0) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const std::size_t n = x.size();
  const std::size_t count = samples == 0 || samples > n ? n : samples;
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = count == n ? k : k * n / count;
    const float saved = x[i];
    x[i] = saved + static_cast<float>(tol.eps);
    const double plus = loss();
    x[i] = saved - static_cast<float>(tol.eps);
    const double minus = loss();
    x[i] = saved;
    // The step actually taken is what the float grid allows, not exactly eps.
    const double h = static_cast<double>(saved + static_cast<float>(tol.eps)) -
                     static_cast<double>(saved - static_cast<float>(tol.eps));
    const double numeric = (plus - minus) / h;
    EXPECT_NEAR(analytic[i], numeric, tol.atol + tol.rtol * std::fabs(numeric))
        << what << "[" << i << "]";
  }
}

}  // namespace longhaul::train::testing
