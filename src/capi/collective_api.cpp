// lh_allreduce* and lh_op_*: the C face of the collective engine.
#include <fmt/format.h>

#include "capi/handles.hpp"
#include "collective/allreduce.hpp"
#include "gpu/staged_collectives.hpp"

namespace lh = longhaul;

lh::Result<lh::collective::AllReduceSpec> lh::capi::allreduce_spec(
    const void* send, void* recv, size_t count, lh_dtype dtype, lh_reduce_op op,
    const lh_allreduce_options* options) {
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  if (options) o = *options;
  if (count > 0 && (!send || !recv)) return lh::invalid_argument("send and recv must not be NULL");
  if (dtype < LH_DTYPE_F32 || dtype > LH_DTYPE_U64)
    return lh::invalid_argument(fmt::format("unknown dtype {}", static_cast<int>(dtype)));
  if (op < LH_OP_SUM || op > LH_OP_PROD)
    return lh::invalid_argument(fmt::format("unknown reduce op {}", static_cast<int>(op)));
  if (o.codec < LH_CODEC_NONE || o.codec > LH_CODEC_E3M0)
    return lh::invalid_argument(fmt::format("unknown codec {}", static_cast<int>(o.codec)));
  if (o.schedule < LH_SCHEDULE_AUTO || o.schedule > LH_SCHEDULE_DIRECT)
    return lh::invalid_argument(fmt::format("unknown schedule {}", static_cast<int>(o.schedule)));
  if (o.segment_bytes == 0) return lh::invalid_argument("segment_bytes must be positive");
  LH_RETURN_IF_ERROR(lh::capi::check_memory_kind(o.memory));
  lh::collective::AllReduceSpec s;
  s.input = send;
  s.output = recv;
  s.count = count;
  s.dtype = static_cast<lh::quant::DType>(dtype);
  s.op = static_cast<lh::quant::ReduceOp>(op);
  s.codec = static_cast<lh::quant::Codec>(o.codec);
  s.block = o.block;
  s.residual = o.residual;
  s.schedule = static_cast<lh::collective::Schedule>(o.schedule);
  s.segment_bytes = o.segment_bytes;
  s.restore_input = o.restore_input != 0;
  return s;
}

lh::Status lh::capi::check_memory_kind(lh_memory memory) {
  if (memory < LH_MEMORY_AUTO || memory > LH_MEMORY_CUDA)
    return lh::invalid_argument(fmt::format("unknown memory kind {}", static_cast<int>(memory)));
  return Status::ok();
}

lh::gpu::Memory lh::capi::memory_kind(lh_memory memory) {
  if (memory == LH_MEMORY_AUTO) return gpu::Memory::kAuto;
  return memory == LH_MEMORY_CUDA ? gpu::Memory::kCuda : gpu::Memory::kHost;
}

lh::gpu::Memory lh::capi::memory_of(const lh_allreduce_options* options) {
  return options ? memory_kind(options->memory) : gpu::Memory::kAuto;
}

// The defaults are collective::AllReduceSpec's; nothing is written here.
extern "C" void lh_allreduce_options_init(lh_allreduce_options* o) {
  if (!o) return;
  const lh::collective::AllReduceSpec d;
  *o = lh_allreduce_options{};
  o->codec = static_cast<lh_codec>(d.codec);
  o->block = static_cast<uint32_t>(d.block);
  o->schedule = static_cast<lh_schedule>(d.schedule);
  o->residual = d.residual;
  o->segment_bytes = static_cast<uint32_t>(d.segment_bytes);
  o->restore_input = d.restore_input ? 1 : 0;
  o->memory = LH_MEMORY_AUTO;
}

extern "C" lh_status lh_allreduce_async(lh_comm* comm, const void* send, void* recv, size_t count,
                                        lh_dtype dtype, lh_reduce_op op,
                                        const lh_allreduce_options* options, lh_op** out) {
  if (!comm || !out) return lh::capi::null_argument("lh_allreduce_async");
  *out = nullptr;
  auto spec = lh::capi::allreduce_spec(send, recv, count, dtype, op, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  if (auto staged = lh::gpu::stage_device_buffers(*spec, lh::capi::memory_of(options)); !staged)
    return lh::capi::finish(comm, staged.status());
  return lh::capi::hand_out(comm, comm->impl->collectives().allreduce(*spec), out);
}

extern "C" lh_status lh_allreduce(lh_comm* comm, const void* send, void* recv, size_t count,
                                  lh_dtype dtype, lh_reduce_op op,
                                  const lh_allreduce_options* options, lh_op_info* info) {
  lh_op* handle = nullptr;
  lh_status s = lh_allreduce_async(comm, send, recv, count, dtype, op, options, &handle);
  if (s != LH_OK) return s;
  return lh::capi::wait_and_destroy(comm, handle, info);
}

lh_status lh::capi::wait_and_destroy(lh_comm* comm, lh_op* op, lh_op_info* info) {
  lh_status s = lh_op_wait(op);
  if (s != LH_OK) finish(comm, op->impl->status());
  if (info) lh_op_get_info(op, info);
  lh_op_destroy(op);
  return s;
}

extern "C" lh_status lh_reduce_scatter_async(lh_comm* comm, const void* send, void* recv,
                                             size_t recv_count, const size_t* recv_counts,
                                             lh_dtype dtype, lh_reduce_op op,
                                             const lh_allreduce_options* options, lh_op** out) {
  if (!comm || !out) return lh::capi::null_argument("lh_reduce_scatter_async");
  *out = nullptr;
  auto layout = lh::capi::group_counts(comm, recv_count, recv_counts);
  if (!layout) return lh::capi::finish(comm, layout.status());
  size_t total = 0;
  for (size_t c : layout->counts) total += c;
  if (layout->counts[layout->rank] != recv_count)
    return lh::capi::finish(comm, lh::invalid_argument(fmt::format(
                                      "recv_count {} differs from recv_counts[{}] = {}", recv_count,
                                      layout->rank, layout->counts[layout->rank])));
  if (recv_count > 0 && !recv) return lh::capi::null_argument("lh_reduce_scatter_async");
  static std::byte nowhere;  // a part of 0 elements is written nowhere
  void* part = recv ? recv : &nowhere;
  auto spec = lh::capi::allreduce_spec(send, part, total, dtype, op, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  spec->output = nullptr;
  spec->scatter_output = part;
  spec->chunk_counts = std::move(layout->counts);
  if (auto staged = lh::gpu::stage_device_buffers(*spec, lh::capi::memory_of(options), recv_count);
      !staged)
    return lh::capi::finish(comm, staged.status());
  return lh::capi::hand_out(comm, comm->impl->collectives().allreduce(*spec), out);
}

extern "C" lh_status lh_reduce_scatter(lh_comm* comm, const void* send, void* recv,
                                       size_t recv_count, const size_t* recv_counts, lh_dtype dtype,
                                       lh_reduce_op op, const lh_allreduce_options* options,
                                       lh_op_info* info) {
  lh_op* handle = nullptr;
  lh_status s = lh_reduce_scatter_async(comm, send, recv, recv_count, recv_counts, dtype, op,
                                        options, &handle);
  if (s != LH_OK) return s;
  return lh::capi::wait_and_destroy(comm, handle, info);
}

extern "C" lh_status lh_op_test(lh_op* op, int* done) {
  if (!op || !done) return lh::capi::null_argument("lh_op_test");
  *done = op->impl->test() ? 1 : 0;
  return LH_OK;
}

extern "C" lh_status lh_op_wait(lh_op* op) {
  if (!op) return lh::capi::null_argument("lh_op_wait");
  return lh::capi::finish(op, op->impl->wait());
}

extern "C" lh_status lh_op_get_info(const lh_op* op, lh_op_info* info) {
  if (!op || !info) return lh::capi::null_argument("lh_op_get_info");
  const auto i = op->impl->info();
  info->bytes_sent = i.bytes_sent;
  info->bytes_received = i.bytes_received;
  info->world_size = static_cast<uint32_t>(i.world_size);
  info->schedule = static_cast<lh_schedule>(i.schedule);
  return LH_OK;
}

extern "C" const char* lh_op_last_error(const lh_op* op) {
  if (!op) return "";
  longhaul::MutexLock lock(op->mu);
  return op->last_error.c_str();
}

extern "C" void lh_op_destroy(lh_op* op) {
  if (!op) return;
  (void)op->impl->wait();  // the buffers stay in use until the operation completes
  delete op;
}

extern "C" lh_status lh_allreduce_batch(lh_comm* comm, const void* const* sends, void* const* recvs,
                                        const size_t* counts, size_t count, lh_dtype dtype,
                                        lh_reduce_op op, const lh_allreduce_options* options,
                                        uint32_t max_attempts) {
  if (!comm || (count > 0 && (!sends || !recvs || !counts)))
    return lh::capi::null_argument("lh_allreduce_batch");
  if (count == 0) return LH_OK;
  auto spec = lh::capi::allreduce_spec(sends[0], recvs[0], counts[0], dtype, op, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  if (spec->residual && count != 1)
    return lh::capi::finish(
        comm, lh::invalid_argument("an error-feedback residual serves a batch of one"));
  std::vector<lh::gpu::BatchBuffers> buffers;
  for (size_t i = 0; i < count; ++i) buffers.push_back({sends[i], recvs[i], counts[i]});
  if (auto s = lh::gpu::residual_on_host(spec->residual, lh::capi::memory_of(options)); !s)
    return lh::capi::finish(comm, s);
  auto landings = lh::gpu::stage_device_buffers(buffers, spec->dtype, lh::capi::memory_of(options));
  if (!landings) return lh::capi::finish(comm, landings.status());
  std::vector<lh::peer::Communicator::BatchItem> items;
  for (const auto& b : buffers) items.push_back({b.input, b.output, b.count});
  lh::Status s = comm->impl->communicator().allreduce_batch(items, *spec, max_attempts);
  for (const auto& land : *landings)
    if (s) s = land();
  return lh::capi::finish(comm, s);
}
