// derive_stream: the layout stated in stream.hpp.
#include "rng/stream.hpp"

#include "rng/philox.hpp"

namespace longhaul::rng {
namespace {

constexpr std::uint32_t lo32(std::uint64_t v) {
  return static_cast<std::uint32_t>(v);
}
constexpr std::uint32_t hi32(std::uint64_t v) {
  return static_cast<std::uint32_t>(v >> 32);
}

}  // namespace

PhiloxStream derive_stream(const StreamId& id) {
  const PhiloxBlock d =
      philox4x32_10({{lo32(id.step), hi32(id.step), lo32(id.peer), hi32(id.peer)}},
                    {{lo32(id.seed), hi32(id.seed)}});
  PhiloxStream s;
  s.key[0] = d.w[0];
  s.key[1] = d.w[1];
  s.counter_high[0] = id.perturbation;
  s.counter_high[1] = d.w[2];
  s.counter_high[2] = d.w[3];
  return s;
}

}  // namespace longhaul::rng
