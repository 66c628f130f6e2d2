// Tensors crossing from Python by DLPack (numpy arrays, torch tensors, anything with __dlpack__).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "longhaul/longhaul.h"

namespace longhaul::py {

// A tensor's memory as the C API sees it. `keep` holds the DLPack import (and through it the
// producer's tensor) alive: the memory stays valid as long as `keep` does. Zero-copy.
struct TensorView {
  void* data = nullptr;
  std::size_t count = 0;
  lh_dtype dtype = LH_DTYPE_F32;
  nanobind::object keep;
};

// Imports `obj` for the library. Rules (each refused with the exception named):
//   - It must export DLPack or the buffer protocol: TypeError otherwise.
//   - Its dtype must be one of longhaul's (f32, f64, f16, bf16, i8, u8, i32, u32, i64, u64):
//     TypeError otherwise (e.g. bool, complex).
//   - It must live in CPU or CUDA memory: ValueError for another device. A CUDA tensor is
//     exported with DLPack's stream handshake (stream=1, the legacy default stream), so the
//     library's streams come after the work queued on the stream that wrote it (torch: its
//     current stream) without the host waiting; what the C API does not take in device memory
//     raises its LH_ERR_UNSUPPORTED error (docs/gpu.md).
//   - It must be C-contiguous (a view with gaps or another order): ValueError.
//   - When `writable`, a read-only array (numpy's flags.writeable False) is refused: ValueError.
// A torch tensor that requires grad is taken through .detach() (the same memory: a parameter is
// written in place as under torch.no_grad()). A zero-size tensor gives count 0. `what` names the
// argument in messages.
TensorView import_tensor(nanobind::handle obj, bool writable, std::string_view what);

// Parses "sum", "avg", "min", "max", "prod" (ValueError otherwise).
lh_reduce_op parse_op(std::string_view op);

// Parses a wire codec: None or "none", "fp16", "bf16", "u8", "u4", "e3m0" (ValueError otherwise).
lh_codec parse_codec(nanobind::handle quant);

// Parses "auto", "ring", "direct" (ValueError otherwise).
lh_schedule parse_schedule(std::string_view schedule);

// A collective's options from its keyword arguments: the codec (parse_codec), the block (None:
// the library's default), the schedule (parse_schedule) and the operation's timeout in seconds
// (None: none; ValueError unless positive, finite and below 2^32 ms); the rest the library's
// defaults.
lh_allreduce_options collective_options(nanobind::handle quant, std::optional<uint32_t> block,
                                        std::string_view schedule,
                                        std::optional<double> timeout = std::nullopt);

// The name of a dtype as Python users know it ("float32", "bfloat16", ...).
const char* dtype_name(lh_dtype dtype);

}  // namespace longhaul::py
