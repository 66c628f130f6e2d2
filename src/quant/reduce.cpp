// The entry points of reduce.hpp: each checks its arguments, pins the FP environment and runs the
// selected ISA's kernel (kernels.hpp; the kernels themselves are reduce_kernels.cpp).
#include "quant/reduce.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "quant/kernels.hpp"

namespace longhaul::quant {
namespace {

Status check_buffer(const void* p, std::size_t count, DType dtype, const char* what) {
  if (count == 0) return Status::ok();
  if (p == nullptr) return invalid_argument(fmt::format("{} is null with count {}", what, count));
  if (reinterpret_cast<std::uintptr_t>(p) % element_size(dtype) != 0) {
    return invalid_argument(fmt::format("{} is not aligned to the {}-byte elements of {}", what,
                                        element_size(dtype), dtype_name(dtype)));
  }
  return Status::ok();
}

Status check_dtype(DType dtype) {
  if (!is_valid(dtype)) {
    return invalid_argument(fmt::format("invalid dtype value {}", static_cast<int>(dtype)));
  }
  return Status::ok();
}

Status check_f32_path(DType dtype, const char* fn) {
  LH_RETURN_IF_ERROR(check_dtype(dtype));
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return {LH_ERR_UNSUPPORTED,
            fmt::format("{} serves f32, f16 and bf16, not {}", fn, dtype_name(dtype))};
  }
  return Status::ok();
}

}  // namespace

Status check_supported(DType dtype, ReduceOp op) {
  LH_RETURN_IF_ERROR(check_dtype(dtype));
  if (!is_valid(op)) {
    return invalid_argument(fmt::format("invalid reduce op value {}", static_cast<int>(op)));
  }
  return Status::ok();
}

Status reduce_into(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  LH_RETURN_IF_ERROR(check_supported(dtype, op));
  LH_RETURN_IF_ERROR(check_buffer(dst, count, dtype, "reduce_into: dst"));
  LH_RETURN_IF_ERROR(check_buffer(src, count, dtype, "reduce_into: src"));
  if (count == 0) return Status::ok();
  return run_selected([&](const Kernels& k) { k.reduce_into(dst, src, count, dtype, op); });
}

Status finalize_avg(void* dst, std::size_t count, DType dtype, std::size_t n) {
  LH_RETURN_IF_ERROR(check_dtype(dtype));
  if (n == 0 || n > (std::size_t{1} << 31)) {
    return invalid_argument(fmt::format("finalize_avg: participant count {} outside [1, 2^31]", n));
  }
  LH_RETURN_IF_ERROR(check_buffer(dst, count, dtype, "finalize_avg: dst"));
  if (count == 0 || n == 1) return Status::ok();
  return run_selected([&](const Kernels& k) { k.finalize_avg(dst, count, dtype, n); });
}

Status accumulate_f32(float* acc, const void* src, std::size_t count, DType dtype) {
  LH_RETURN_IF_ERROR(check_f32_path(dtype, "accumulate_f32"));
  LH_RETURN_IF_ERROR(check_buffer(acc, count, DType::kF32, "accumulate_f32: acc"));
  LH_RETURN_IF_ERROR(check_buffer(src, count, dtype, "accumulate_f32: src"));
  if (count == 0) return Status::ok();
  return run_selected([&](const Kernels& k) { k.accumulate_f32(acc, src, count, dtype); });
}

Status store_from_f32(void* dst, const float* acc, std::size_t count, DType dtype) {
  LH_RETURN_IF_ERROR(check_f32_path(dtype, "store_from_f32"));
  LH_RETURN_IF_ERROR(check_buffer(dst, count, dtype, "store_from_f32: dst"));
  LH_RETURN_IF_ERROR(check_buffer(acc, count, DType::kF32, "store_from_f32: acc"));
  if (count == 0) return Status::ok();
  return run_selected([&](const Kernels& k) { k.store_from_f32(dst, acc, count, dtype); });
}

Status sum_widened(void* dst, std::span<const void* const> sources, std::size_t count, DType dtype,
                   std::size_t average_over) {
  LH_RETURN_IF_ERROR(check_dtype(dtype));
  if (dtype != DType::kF16 && dtype != DType::kBF16) {
    return {LH_ERR_UNSUPPORTED,
            fmt::format("sum_widened serves f16 and bf16, not {}", dtype_name(dtype))};
  }
  if (average_over == 0 || average_over > (std::size_t{1} << 31)) {
    return invalid_argument(
        fmt::format("sum_widened: average_over {} outside [1, 2^31]", average_over));
  }
  LH_RETURN_IF_ERROR(check_buffer(dst, count, dtype, "sum_widened: dst"));
  for (const void* s : sources)
    LH_RETURN_IF_ERROR(check_buffer(s, count, dtype, "sum_widened: source"));
  if (count == 0) return Status::ok();
  return run_selected([&](const Kernels& k) {
    k.sum_widened(dst, sources.data(), sources.size(), count, dtype, average_over);
  });
}

}  // namespace longhaul::quant
