// The entry points of perturbation.hpp: argument checks, then the selected ISA's kernel
// (kernels.hpp) in the default FP environment.
#include "rng/perturbation.hpp"

#include <cmath>
#include <string>

#include "quant/fp_env.hpp"
#include "rng/kernels.hpp"

namespace longhaul::rng {
namespace {

Status check_range(std::uint64_t first, std::size_t n, const char* what) {
  if (first > kMaxPerturbationElements || n > kMaxPerturbationElements - first) {
    return invalid_argument(std::string(what) + ": elements " + std::to_string(first) + " + " +
                            std::to_string(n) + " exceed the 2^39 a stream covers");
  }
  return Status::ok();
}

Status check_finite(float c, const char* what) {
  if (!std::isfinite(c)) return invalid_argument(std::string(what) + ": coefficient not finite");
  return Status::ok();
}

// out[j] = (in ? in[j] : 0 +) c * z_{first + j} on the selected kernels.
Status run_add_signed(const StreamId& id, std::uint64_t first, const float* in, float* out,
                      std::size_t n, float c) {
  Result<const RngEntries*> k = selected_rng_kernels();
  if (!k) return k.status();
  if (n == 0) return Status::ok();
  quant::ScopedDefaultFpEnv fp_env;
  (*k)->add_signed(derive_stream(id), first, in, out, n, c);
  return Status::ok();
}

}  // namespace

Status fill_perturbation(const StreamId& id, std::uint64_t first, std::span<float> z) {
  LH_RETURN_IF_ERROR(check_range(first, z.size(), "fill_perturbation"));
  return run_add_signed(id, first, nullptr, z.data(), z.size(), 1.0f);
}

Status perturb(const StreamId& id, std::uint64_t first, std::span<float> theta, float c) {
  LH_RETURN_IF_ERROR(check_range(first, theta.size(), "perturb"));
  LH_RETURN_IF_ERROR(check_finite(c, "perturb"));
  return run_add_signed(id, first, theta.data(), theta.data(), theta.size(), c);
}

Status perturbed_copy(const StreamId& id, std::uint64_t first, std::span<const float> theta,
                      std::span<float> out, float c) {
  LH_RETURN_IF_ERROR(check_range(first, theta.size(), "perturbed_copy"));
  LH_RETURN_IF_ERROR(check_finite(c, "perturbed_copy"));
  if (out.size() != theta.size()) {
    return invalid_argument("perturbed_copy: out has " + std::to_string(out.size()) +
                            " elements, theta " + std::to_string(theta.size()));
  }
  return run_add_signed(id, first, theta.data(), out.data(), theta.size(), c);
}

Status apply_update(const StreamId& id, std::uint64_t first, std::span<float> theta, float lr,
                    float projected_gradient) {
  LH_RETURN_IF_ERROR(check_range(first, theta.size(), "apply_update"));
  const float step = lr * projected_gradient;
  LH_RETURN_IF_ERROR(check_finite(step, "apply_update (lr * g)"));
  return run_add_signed(id, first, theta.data(), theta.data(), theta.size(), -step);
}

Status philox_words(const PhiloxStream& stream, std::uint32_t first_block,
                    std::span<std::uint32_t> out) {
  if (out.size() % 4 != 0) {
    return invalid_argument("philox_words: " + std::to_string(out.size()) +
                            " words is not whole blocks of 4");
  }
  Result<const RngEntries*> k = selected_rng_kernels();
  if (!k) return k.status();
  (*k)->philox_words(stream, first_block, out.size() / 4, out.data());
  return Status::ok();
}

}  // namespace longhaul::rng
