// lh_allreduce*, lh_reduce_scatter* and lh_allreduce_batch: the C face of the all-reducing
// collectives a peer stages (peer/staged_ops.hpp).
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "capi/convert.hpp"
#include "capi/handles.hpp"

namespace lh = longhaul;

extern "C" void lh_allreduce_options_init(lh_allreduce_options* o) {
  if (!o) return;
  *o = lh::capi::allreduce_defaults();
}

extern "C" lh_status lh_allreduce_async(lh_comm* comm, const void* send, void* recv, size_t count,
                                        lh_dtype dtype, lh_reduce_op op,
                                        const lh_allreduce_options* options, lh_op** out) {
  if (!out) return lh::capi::null_argument("lh_allreduce_async");
  *out = nullptr;
  if (lh_status s = lh::capi::check_open(comm, "lh_allreduce_async"); s != LH_OK) return s;
  auto spec = lh::capi::allreduce_spec(send, recv, count, dtype, op, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  return lh::capi::hand_out(
      comm, comm->impl->staged().allreduce(std::move(*spec), lh::capi::memory_of(options)), out);
}

// Not lh_allreduce_async and a wait: the blocking call's outcome is settled with the group
// (peer/settled_allreduce.hpp), so it returns OK on this peer exactly when on every peer.
extern "C" lh_status lh_allreduce(lh_comm* comm, const void* send, void* recv, size_t count,
                                  lh_dtype dtype, lh_reduce_op op,
                                  const lh_allreduce_options* options, lh_op_info* info) {
  if (lh_status s = lh::capi::check_open(comm, "lh_allreduce"); s != LH_OK) return s;
  auto spec = lh::capi::allreduce_spec(send, recv, count, dtype, op, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  std::optional<lh::collective::OpInfo> started;
  lh::Status s = comm->impl->staged().allreduce_settled(std::move(*spec),
                                                        lh::capi::memory_of(options), &started);
  if (info && started) {
    info->bytes_sent = started->bytes_sent;
    info->bytes_received = started->bytes_received;
    info->world_size = static_cast<uint32_t>(started->world_size);
    info->schedule = static_cast<lh_schedule>(started->schedule);
  }
  return lh::capi::finish(comm, s);
}

// The parts are checked against the group first: the whole's conversion needs their total.
extern "C" lh_status lh_reduce_scatter_async(lh_comm* comm, const void* send, void* recv,
                                             size_t recv_count, const size_t* recv_counts,
                                             lh_dtype dtype, lh_reduce_op op,
                                             const lh_allreduce_options* options, lh_op** out) {
  if (!out) return lh::capi::null_argument("lh_reduce_scatter_async");
  *out = nullptr;
  if (lh_status s = lh::capi::check_open(comm, "lh_reduce_scatter_async"); s != LH_OK) return s;
  auto parts = comm->impl->staged().reduce_scatter_parts(recv_count, recv_counts);
  if (!parts) return lh::capi::finish(comm, parts.status());
  if (recv_count > 0 && !recv) return lh::capi::null_argument("lh_reduce_scatter_async");
  static std::byte nowhere;  // a part of 0 elements is written nowhere
  auto whole =
      lh::capi::allreduce_spec(send, recv ? recv : &nowhere, parts->total(), dtype, op, options);
  if (!whole) return lh::capi::finish(comm, whole.status());
  return lh::capi::hand_out(comm,
                            comm->impl->staged().reduce_scatter(
                                std::move(*whole), std::move(*parts), lh::capi::memory_of(options)),
                            out);
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

extern "C" lh_status lh_allreduce_batch(lh_comm* comm, const void* const* sends, void* const* recvs,
                                        const size_t* counts, size_t count, lh_dtype dtype,
                                        lh_reduce_op op, const lh_allreduce_options* options,
                                        uint32_t max_attempts) {
  if (count > 0 && (!sends || !recvs || !counts))
    return lh::capi::null_argument("lh_allreduce_batch");
  if (lh_status s = lh::capi::check_open(comm, "lh_allreduce_batch"); s != LH_OK) return s;
  if (count == 0) return LH_OK;
  auto spec = lh::capi::allreduce_spec(sends[0], recvs[0], counts[0], dtype, op, options);
  if (!spec) return lh::capi::finish(comm, spec.status());
  std::vector<lh::peer::BatchItem> items;
  for (size_t i = 0; i < count; ++i) items.push_back({sends[i], recvs[i], counts[i]});
  return lh::capi::finish(
      comm, comm->impl->staged().allreduce_batch(items, std::move(*spec),
                                                 lh::capi::memory_of(options), max_attempts));
}
