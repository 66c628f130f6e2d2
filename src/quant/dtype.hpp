// Element types and reduction operators of the collectives, with their element sizes.
//
// The integer values are part of the C ABI (include/longhaul/longhaul.h mirrors them) and of the
// wire: never renumber an enumerator, only append.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace longhaul::quant {

enum class DType : std::uint8_t {
  kF32 = 0,
  kF64 = 1,
  kF16 = 2,   // IEEE 754 binary16
  kBF16 = 3,  // bfloat16: the upper half of an f32
  kI8 = 4,
  kU8 = 5,
  kI32 = 6,
  kU32 = 7,
  kI64 = 8,
  kU64 = 9,
};
inline constexpr int kNumDTypes = 10;

enum class ReduceOp : std::uint8_t {
  kSum = 0,
  kAvg = 1,  // kSum during the reduction, then finalize_avg() divides by the participant count
  kMin = 2,
  kMax = 3,
  kProd = 4,
};
inline constexpr int kNumReduceOps = 5;

// Bytes per element; 0 for a value outside the enumeration.
constexpr std::size_t element_size(DType t) {
  switch (t) {
    case DType::kF64:
    case DType::kI64:
    case DType::kU64:
      return 8;
    case DType::kF32:
    case DType::kI32:
    case DType::kU32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI8:
    case DType::kU8:
      return 1;
  }
  return 0;
}

constexpr bool is_valid(DType t) {
  return static_cast<int>(t) < kNumDTypes;
}
constexpr bool is_valid(ReduceOp op) {
  return static_cast<int>(op) < kNumReduceOps;
}
constexpr bool is_floating(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16;
}

// "f32", "bf16", ...; "invalid" outside the enumeration.
std::string_view dtype_name(DType t);
// "sum", "avg", ...; "invalid" outside the enumeration.
std::string_view reduce_op_name(ReduceOp op);

}  // namespace longhaul::quant
