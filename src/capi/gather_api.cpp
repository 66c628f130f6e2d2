// lh_allgather*, lh_broadcast*, lh_barrier*: the C face of the gathering collectives a peer
// stages (peer/staged_ops.hpp).
#include "capi/convert.hpp"
#include "capi/handles.hpp"

namespace lh = longhaul;

extern "C" lh_status lh_allgather_async(lh_comm* comm, const void* send, size_t send_count,
                                        void* recv, const size_t* recv_counts, lh_dtype dtype,
                                        const lh_allreduce_options* options, lh_op** out) {
  if (!out) return lh::capi::null_argument("lh_allgather_async");
  *out = nullptr;
  if (lh_status s = lh::capi::check_open(comm, "lh_allgather_async"); s != LH_OK) return s;
  auto spec = lh::capi::gather_spec(dtype, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  return lh::capi::hand_out(
      comm,
      comm->impl->staged().allgather(std::move(*spec), send, send_count, recv, recv_counts,
                                     lh::capi::memory_of(options)),
      out);
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
  if (!out) return lh::capi::null_argument("lh_broadcast_async");
  *out = nullptr;
  if (lh_status s = lh::capi::check_open(comm, "lh_broadcast_async"); s != LH_OK) return s;
  auto spec = lh::capi::gather_spec(dtype, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  return lh::capi::hand_out(comm,
                            comm->impl->staged().broadcast(std::move(*spec), buffer, count, root,
                                                           lh::capi::memory_of(options)),
                            out);
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
  if (!out) return lh::capi::null_argument("lh_barrier_async");
  *out = nullptr;
  if (lh_status s = lh::capi::check_open(comm, "lh_barrier_async"); s != LH_OK) return s;
  auto spec = lh::capi::gather_spec(LH_DTYPE_U8, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  if (spec->codec != lh::quant::Codec::kNone)
    return lh::capi::finish(comm, lh::invalid_argument("a barrier carries no data to encode"));
  return lh::capi::hand_out(comm, comm->impl->staged().barrier(std::move(*spec)), out);
}

extern "C" lh_status lh_barrier(lh_comm* comm, const lh_allreduce_options* options,
                                lh_op_info* info) {
  lh_op* op = nullptr;
  lh_status s = lh_barrier_async(comm, options, &op);
  if (s != LH_OK) return s;
  return lh::capi::wait_and_destroy(comm, op, info);
}
