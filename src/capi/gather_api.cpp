// lh_allgather*, lh_broadcast*, lh_barrier*: the C face of the gathering collectives.
#include <fmt/format.h>

#include "capi/handles.hpp"
#include "collective/gather.hpp"
#include "gpu/staged_collectives.hpp"

namespace {

namespace lh = longhaul;

// The wire options of a gathering collective (lh_allreduce_options, less the residual).
lh::Result<lh::collective::GatherSpec> make_spec(lh_dtype dtype,
                                                 const lh_allreduce_options* options) {
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  if (options) o = *options;
  if (dtype < LH_DTYPE_F32 || dtype > LH_DTYPE_U64)
    return lh::invalid_argument(fmt::format("unknown dtype {}", static_cast<int>(dtype)));
  if (o.codec < LH_CODEC_NONE || o.codec > LH_CODEC_E3M0)
    return lh::invalid_argument(fmt::format("unknown codec {}", static_cast<int>(o.codec)));
  if (o.schedule < LH_SCHEDULE_AUTO || o.schedule > LH_SCHEDULE_DIRECT)
    return lh::invalid_argument(fmt::format("unknown schedule {}", static_cast<int>(o.schedule)));
  if (o.segment_bytes == 0) return lh::invalid_argument("segment_bytes must be positive");
  if (o.residual)
    return lh::invalid_argument("error feedback serves all-reduce and reduce-scatter");
  lh::collective::GatherSpec s;
  s.dtype = static_cast<lh::quant::DType>(dtype);
  s.codec = static_cast<lh::quant::Codec>(o.codec);
  s.block = o.block;
  s.schedule = static_cast<lh::collective::Schedule>(o.schedule);
  s.segment_bytes = o.segment_bytes;
  s.restore_output = o.restore_input != 0;
  return s;
}

}  // namespace

lh::Result<lh::capi::GroupCounts> lh::capi::group_counts(lh_comm* comm, size_t count,
                                                         const size_t* counts) {
  if (Status s = comm->impl->group().failure(); !s) return s;
  const auto view = comm->impl->collectives().ring_view();  // before admission: a group of one
  GroupCounts g;
  g.rank = view.rank;
  g.counts = counts ? std::vector<size_t>(counts, counts + view.size)
                    : std::vector<size_t>(view.size, count);
  return g;
}

extern "C" lh_status lh_allgather_async(lh_comm* comm, const void* send, size_t send_count,
                                        void* recv, const size_t* recv_counts, lh_dtype dtype,
                                        const lh_allreduce_options* options, lh_op** out) {
  if (!comm || !out) return lh::capi::null_argument("lh_allgather_async");
  *out = nullptr;
  auto spec = make_spec(dtype, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  auto layout = lh::capi::group_counts(comm, send_count, recv_counts);
  if (!layout) return lh::capi::finish(comm, layout.status());
  if (layout->counts[layout->rank] != send_count)
    return lh::capi::finish(comm, lh::invalid_argument(fmt::format(
                                      "send_count {} differs from recv_counts[{}] = {}", send_count,
                                      layout->rank, layout->counts[layout->rank])));
  spec->input = send;
  spec->output = recv;
  spec->counts = std::move(layout->counts);
  if (auto staged =
          lh::gpu::stage_device_buffers(*spec, lh::capi::memory_of(options), layout->rank);
      !staged)
    return lh::capi::finish(comm, staged.status());
  return lh::capi::hand_out(comm, comm->impl->collectives().gather(*spec), out);
}

extern "C" lh_status lh_allgather(lh_comm* comm, const void* send, size_t send_count, void* recv,
                                  const size_t* recv_counts, lh_dtype dtype,
                                  const lh_allreduce_options* options, lh_op_info* info) {
  lh_op* op = nullptr;
  lh_status s = lh_allgather_async(comm, send, send_count, recv, recv_counts, dtype, options, &op);
  if (s != LH_OK) return s;
  return lh::capi::wait_and_destroy(comm, op, info);
}

extern "C" lh_status lh_broadcast_async(lh_comm* comm, void* buffer, size_t count, lh_dtype dtype,
                                        uint32_t root, const lh_allreduce_options* options,
                                        lh_op** out) {
  if (!comm || !out) return lh::capi::null_argument("lh_broadcast_async");
  *out = nullptr;
  auto spec = make_spec(dtype, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  auto layout = lh::capi::group_counts(comm, 0, nullptr);
  if (!layout) return lh::capi::finish(comm, layout.status());
  if (root >= layout->counts.size())
    return lh::capi::finish(
        comm, lh::invalid_argument(fmt::format("root {} is not a ring position of a group of {}",
                                               root, layout->counts.size())));
  // An all-gather in which only the root contributes, in place.
  layout->counts[root] = count;
  spec->input = root == layout->rank ? buffer : nullptr;
  spec->output = buffer;
  spec->counts = std::move(layout->counts);
  if (auto staged =
          lh::gpu::stage_device_buffers(*spec, lh::capi::memory_of(options), layout->rank);
      !staged)
    return lh::capi::finish(comm, staged.status());
  return lh::capi::hand_out(comm, comm->impl->collectives().gather(*spec), out);
}

extern "C" lh_status lh_broadcast(lh_comm* comm, void* buffer, size_t count, lh_dtype dtype,
                                  uint32_t root, const lh_allreduce_options* options,
                                  lh_op_info* info) {
  lh_op* op = nullptr;
  lh_status s = lh_broadcast_async(comm, buffer, count, dtype, root, options, &op);
  if (s != LH_OK) return s;
  return lh::capi::wait_and_destroy(comm, op, info);
}

extern "C" lh_status lh_barrier_async(lh_comm* comm, const lh_allreduce_options* options,
                                      lh_op** out) {
  if (!comm || !out) return lh::capi::null_argument("lh_barrier_async");
  *out = nullptr;
  auto spec = make_spec(LH_DTYPE_U8, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  if (spec->codec != lh::quant::Codec::kNone)
    return lh::capi::finish(comm, lh::invalid_argument("a barrier carries no data to encode"));
  auto layout = lh::capi::group_counts(comm, 0, nullptr);
  if (!layout) return lh::capi::finish(comm, layout.status());
  // An all-gather of nothing: every member's empty contribution still reaches every member.
  spec->counts = std::move(layout->counts);
  return lh::capi::hand_out(comm, comm->impl->collectives().gather(*spec), out);
}

extern "C" lh_status lh_barrier(lh_comm* comm, const lh_allreduce_options* options,
                                lh_op_info* info) {
  lh_op* op = nullptr;
  lh_status s = lh_barrier_async(comm, options, &op);
  if (s != LH_OK) return s;
  return lh::capi::wait_and_destroy(comm, op, info);
}
