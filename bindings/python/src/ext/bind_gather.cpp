// Python bindings of the other collectives: reduce-scatter, all-gather, broadcast and barrier,
// each returning a Work as Communicator.allreduce does (lh_*_async; longhaul.h has the contracts).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.hpp"
#include "comm.hpp"
#include "errors.hpp"
#include "tensors.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace longhaul::py {
namespace {

// The started operation as a Work holding its tensors, or the library's error.
Work* started(lh_comm* c, lh_status s, lh_op* handle, nb::handle result,
              std::vector<nb::object> keep) {
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
  return new Work(handle, nb::borrow(result), std::move(keep));
}

void check_same_dtype(const TensorView& a, const TensorView& b) {
  if (a.dtype != b.dtype) throw nb::type_error("tensor and out must have the same dtype");
}

// The C API sees pointers only: a tensor that does not hold a part per member would be read or
// written past (or short of) its end, so the sizes are checked here, against the group's size.
void check_parts(const Communicator& comm, size_t whole, size_t part, const char* what) {
  const auto members = static_cast<size_t>(comm.attribute(LH_ATTR_GROUP_WORLD_SIZE));
  if (whole != part * members)
    throw nb::value_error((std::string(what) + " must hold one part per member of the group: " +
                           std::to_string(members) + " x " + std::to_string(part) + " = " +
                           std::to_string(part * members) + " elements, not " +
                           std::to_string(whole))
                              .c_str());
}

Work* reduce_scatter(Communicator& comm, nb::handle tensor, nb::handle out, const std::string& op,
                     nb::handle quant, std::optional<uint32_t> block, const std::string& schedule) {
  const lh_reduce_op rop = parse_op(op);
  const lh_allreduce_options o = collective_options(quant, block, schedule);
  TensorView send = import_tensor(tensor, /*writable=*/false, "tensor");
  TensorView recv = import_tensor(out, /*writable=*/true, "out");
  check_same_dtype(send, recv);
  check_parts(comm, send.count, recv.count, "tensor");
  lh_comm* c = comm.handle();
  lh_op* handle = nullptr;
  const lh_status s = lh_reduce_scatter_async(c, send.data, recv.data, recv.count, nullptr,
                                              send.dtype, rop, &o, &handle);
  return started(c, s, handle, out, {send.keep, recv.keep});
}

Work* allgather(Communicator& comm, nb::handle tensor, nb::handle out, nb::handle quant,
                std::optional<uint32_t> block, const std::string& schedule) {
  const lh_allreduce_options o = collective_options(quant, block, schedule);
  TensorView send = import_tensor(tensor, /*writable=*/false, "tensor");
  TensorView recv = import_tensor(out, /*writable=*/true, "out");
  check_same_dtype(send, recv);
  check_parts(comm, recv.count, send.count, "out");
  lh_comm* c = comm.handle();
  lh_op* handle = nullptr;
  const lh_status s =
      lh_allgather_async(c, send.data, send.count, recv.data, nullptr, send.dtype, &o, &handle);
  return started(c, s, handle, out, {send.keep, recv.keep});
}

Work* broadcast(Communicator& comm, nb::handle tensor, uint32_t root, nb::handle quant,
                std::optional<uint32_t> block, const std::string& schedule) {
  const lh_allreduce_options o = collective_options(quant, block, schedule);
  TensorView buffer = import_tensor(tensor, /*writable=*/true, "tensor");
  lh_comm* c = comm.handle();
  lh_op* handle = nullptr;
  const lh_status s =
      lh_broadcast_async(c, buffer.data, buffer.count, buffer.dtype, root, &o, &handle);
  return started(c, s, handle, tensor, {buffer.keep});
}

Work* barrier(Communicator& comm, const std::string& schedule) {
  const lh_allreduce_options o = collective_options(nb::none(), std::nullopt, schedule);
  lh_comm* c = comm.handle();
  lh_op* handle = nullptr;
  const lh_status s = lh_barrier_async(c, &o, &handle);
  return started(c, s, handle, nb::none(), {});
}

}  // namespace

void define_gathering(nb::class_<Communicator>& comm) {
  comm.def("reduce_scatter", &reduce_scatter, "tensor"_a, "out"_a, "op"_a = "sum", nb::kw_only(),
           "quant"_a = nb::none(), "block"_a = nb::none(), "schedule"_a = "auto",
           nb::sig("def reduce_scatter(self, tensor: object, out: object, op: str = 'sum', *, "
                   "quant: str | None = None, block: int | None = None, schedule: str = 'auto') "
                   "-> Work"),
           nb::rv_policy::take_ownership,
           "Starts a reduce-scatter (lh_reduce_scatter_async): `tensor` holds every member's part "
           "in ring order (group_size parts of out's size), each reduced with `op` over the group; "
           "`out` receives this member's part (ring position `rank`), written only on success. "
           "Returns a Work whose wait() returns `out`.")
      .def("allgather", &allgather, "tensor"_a, "out"_a, nb::kw_only(), "quant"_a = nb::none(),
           "block"_a = nb::none(), "schedule"_a = "auto",
           nb::sig("def allgather(self, tensor: object, out: object, *, quant: str | None = "
                   "None, block: int | None = None, schedule: str = 'auto') -> Work"),
           nb::rv_policy::take_ownership,
           "Starts an all-gather (lh_allgather_async): every member contributes `tensor`, and "
           "`out` (group_size times its size) receives every contribution in ring order. Returns "
           "a Work whose wait() returns `out`.")
      .def("broadcast", &broadcast, "tensor"_a, "root"_a = 0, nb::kw_only(), "quant"_a = nb::none(),
           "block"_a = nb::none(), "schedule"_a = "auto",
           nb::sig("def broadcast(self, tensor: object, root: int = 0, *, quant: str | None = "
                   "None, block: int | None = None, schedule: str = 'auto') -> Work"),
           nb::rv_policy::take_ownership,
           "Starts a broadcast (lh_broadcast_async): the tensor of the member at ring position "
           "`root` ends in `tensor` on every member (in place). Returns a Work whose wait() "
           "returns `tensor`.")
      .def("barrier", &barrier, nb::kw_only(), "schedule"_a = "auto",
           nb::sig("def barrier(self, *, schedule: str = 'auto') -> Work"),
           nb::rv_policy::take_ownership,
           "Starts a barrier (lh_barrier_async): its Work completes once every member has "
           "started it; wait() returns None.");
}

}  // namespace longhaul::py
