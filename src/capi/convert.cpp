#include "capi/convert.hpp"

#include <fmt/format.h>

namespace longhaul::capi {
namespace {

Status check_dtype(lh_dtype dtype) {
  if (dtype < LH_DTYPE_F32 || dtype > LH_DTYPE_U64)
    return invalid_argument(fmt::format("unknown dtype {}", static_cast<int>(dtype)));
  return Status::ok();
}

// The wire options every collective checks: codec, schedule, segment size.
Status check_wire_options(const lh_allreduce_options& o) {
  if (o.codec == LH_CODEC_SPARSE)
    return invalid_argument(
        "LH_CODEC_SPARSE is the sync engine's codec; a collective of sparse encodings is "
        "lh_sparse_allgather");
  if (o.codec < LH_CODEC_NONE || o.codec > LH_CODEC_E3M0)
    return invalid_argument(fmt::format("unknown codec {}", static_cast<int>(o.codec)));
  if (o.schedule < LH_SCHEDULE_AUTO || o.schedule > LH_SCHEDULE_DIRECT)
    return invalid_argument(fmt::format("unknown schedule {}", static_cast<int>(o.schedule)));
  if (o.segment_bytes == 0) return invalid_argument("segment_bytes must be positive");
  return Status::ok();
}

}  // namespace

// The defaults are collective::AllReduceSpec's; nothing is written here.
lh_allreduce_options allreduce_defaults() {
  const collective::AllReduceSpec d;
  lh_allreduce_options o{};
  o.codec = static_cast<lh_codec>(d.codec);
  o.block = static_cast<uint32_t>(d.block);
  o.schedule = static_cast<lh_schedule>(d.schedule);
  o.residual = d.residual;
  o.segment_bytes = static_cast<uint32_t>(d.segment_bytes);
  o.restore_input = d.restore_input ? 1 : 0;
  o.memory = LH_MEMORY_AUTO;
  o.timeout_ms = static_cast<uint32_t>(d.timeout.count());
  return o;
}

Result<collective::AllReduceSpec> allreduce_spec(const void* send, void* recv, size_t count,
                                                 lh_dtype dtype, lh_reduce_op op,
                                                 const lh_allreduce_options* options) {
  const lh_allreduce_options o = options ? *options : allreduce_defaults();
  if (count > 0 && (!send || !recv)) return invalid_argument("send and recv must not be NULL");
  LH_RETURN_IF_ERROR(check_dtype(dtype));
  if (op < LH_OP_SUM || op > LH_OP_PROD)
    return invalid_argument(fmt::format("unknown reduce op {}", static_cast<int>(op)));
  LH_RETURN_IF_ERROR(check_wire_options(o));
  LH_RETURN_IF_ERROR(check_memory_kind(o.memory));
  collective::AllReduceSpec s;
  s.input = send;
  s.output = recv;
  s.count = count;
  s.dtype = static_cast<quant::DType>(dtype);
  s.op = static_cast<quant::ReduceOp>(op);
  s.codec = static_cast<quant::Codec>(o.codec);
  s.block = o.block;
  s.residual = o.residual;
  s.schedule = static_cast<collective::Schedule>(o.schedule);
  s.segment_bytes = o.segment_bytes;
  s.restore_input = o.restore_input != 0;
  s.timeout = std::chrono::milliseconds(o.timeout_ms);
  return s;
}

Result<collective::GatherSpec> gather_spec(lh_dtype dtype, const lh_allreduce_options* options) {
  const lh_allreduce_options o = options ? *options : allreduce_defaults();
  LH_RETURN_IF_ERROR(check_dtype(dtype));
  LH_RETURN_IF_ERROR(check_wire_options(o));
  if (o.residual) return invalid_argument("error feedback serves all-reduce and reduce-scatter");
  collective::GatherSpec s;
  s.dtype = static_cast<quant::DType>(dtype);
  s.codec = static_cast<quant::Codec>(o.codec);
  s.block = o.block;
  s.schedule = static_cast<collective::Schedule>(o.schedule);
  s.segment_bytes = o.segment_bytes;
  s.restore_output = o.restore_input != 0;
  s.timeout = std::chrono::milliseconds(o.timeout_ms);
  return s;
}

Status check_memory_kind(lh_memory memory) {
  if (memory < LH_MEMORY_AUTO || memory > LH_MEMORY_CUDA)
    return invalid_argument(fmt::format("unknown memory kind {}", static_cast<int>(memory)));
  return Status::ok();
}

gpu::Memory memory_kind(lh_memory memory) {
  if (memory == LH_MEMORY_AUTO) return gpu::Memory::kAuto;
  return memory == LH_MEMORY_CUDA ? gpu::Memory::kCuda : gpu::Memory::kHost;
}

gpu::Memory memory_of(const lh_allreduce_options* options) {
  return options ? memory_kind(options->memory) : gpu::Memory::kAuto;
}

}  // namespace longhaul::capi
