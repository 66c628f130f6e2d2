// Python bindings of the other collectives: reduce-scatter, all-gather, broadcast and barrier,
// each returning a Work as Communicator.allreduce does (lh_*_async; longhaul.h has the contracts),
// and the sparse all-gather (lh_sparse_allgather), blocking, returning every contribution.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <string>
#include <vector>

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
                     nb::handle quant, std::optional<uint32_t> block, const std::string& schedule,
                     std::optional<double> timeout) {
  const lh_reduce_op rop = parse_op(op);
  const lh_allreduce_options o = collective_options(quant, block, schedule, timeout);
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
                std::optional<uint32_t> block, const std::string& schedule,
                std::optional<double> timeout) {
  const lh_allreduce_options o = collective_options(quant, block, schedule, timeout);
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
                std::optional<uint32_t> block, const std::string& schedule,
                std::optional<double> timeout) {
  const lh_allreduce_options o = collective_options(quant, block, schedule, timeout);
  TensorView buffer = import_tensor(tensor, /*writable=*/true, "tensor");
  lh_comm* c = comm.handle();
  lh_op* handle = nullptr;
  const lh_status s =
      lh_broadcast_async(c, buffer.data, buffer.count, buffer.dtype, root, &o, &handle);
  return started(c, s, handle, tensor, {buffer.keep});
}

Work* barrier(Communicator& comm, const std::string& schedule, std::optional<double> timeout) {
  const lh_allreduce_options o = collective_options(nb::none(), std::nullopt, schedule, timeout);
  lh_comm* c = comm.handle();
  lh_op* handle = nullptr;
  const lh_status s = lh_barrier_async(c, &o, &handle);
  return started(c, s, handle, nb::none(), {});
}

// A bytes-like object's bytes (the buffer protocol, C-contiguous), held until released.
class ReadBuffer {
 public:
  explicit ReadBuffer(nb::handle obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      throw nb::type_error(
          "data must be a bytes-like object (bytes, bytearray, memoryview, a "
          "C-contiguous numpy array)");
    }
  }
  ~ReadBuffer() { PyBuffer_Release(&view_); }
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;
  const void* data() const { return view_.buf; }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
};

lh_sparse_validate parse_validate(const std::optional<std::string>& v) {
  if (!v || *v == "none") return LH_SPARSE_VALIDATE_NONE;
  if (*v == "codec") return LH_SPARSE_VALIDATE_CODEC;
  throw nb::value_error(("validate must be None, 'none' or 'codec', not '" + *v + "'").c_str());
}

struct GatheredDeleter {
  void operator()(lh_sparse_gathered* g) const { lh_sparse_gathered_destroy(g); }
};

// Every contribution of a result, in ring order, as bytes.
nb::list contributions(const lh_sparse_gathered* g) {
  uint32_t members = 0, rank = 0;
  check(lh_sparse_gathered_members(g, &members, &rank));
  nb::list out;
  for (uint32_t r = 0; r < members; ++r) {
    const void* data = nullptr;
    size_t bytes = 0;
    check(lh_sparse_gathered_contribution(g, r, &data, &bytes));
    out.append(nb::bytes(static_cast<const char*>(data), bytes));
  }
  return out;
}

// lh_sparse_allgather, blocking (the GIL released): every member's bytes in ring order. A refusal
// raises LonghaulError (status LH_ERR_PROTOCOL) carrying `.malformed` (the refused ring
// positions) and `.contributions` (every contribution, the refused ones included).
nb::list sparse_allgather(Communicator& comm, nb::handle data, const std::string& schedule,
                          const std::optional<std::string>& validate,
                          std::optional<uint64_t> expected_elements,
                          std::optional<uint64_t> max_total_bytes, uint32_t max_attempts,
                          std::optional<uint32_t> segment_bytes) {
  lh_sparse_allgather_options o;
  lh_sparse_allgather_options_init(&o);
  o.schedule = parse_schedule(schedule);
  o.validate = parse_validate(validate);
  set_if(o.expected_elements, expected_elements);
  set_if(o.max_total_bytes, max_total_bytes);
  set_if(o.segment_bytes, segment_bytes);
  o.max_attempts = max_attempts;
  ReadBuffer send(data);
  lh_comm* c = comm.handle();
  lh_sparse_gathered* raw = nullptr;
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_sparse_allgather(c, send.data(), send.size(), &o, &raw, nullptr);
  }
  std::unique_ptr<lh_sparse_gathered, GatheredDeleter> result(raw);
  if (s == LH_OK) return contributions(result.get());
  const std::string message = lh_comm_last_error(c);
  if (s != LH_ERR_PROTOCOL || !result) raise_status(s, message.c_str());
  size_t count = 0;
  check(lh_sparse_gathered_malformed(result.get(), nullptr, 0, &count));
  std::vector<uint32_t> ranks(count);
  check(lh_sparse_gathered_malformed(result.get(), ranks.data(), ranks.size(), &count));
  nb::list malformed;
  for (uint32_t r : ranks) malformed.append(r);
  nb::list all = contributions(result.get());
  try {
    raise_status(s, message.c_str());
  } catch (nb::python_error& e) {
    nb::object exc = nb::borrow(e.value());
    exc.attr("malformed") = malformed;
    exc.attr("contributions") = all;
    throw;
  }
}

}  // namespace

void define_gathering(nb::class_<Communicator>& comm) {
  comm.def("reduce_scatter", &reduce_scatter, "tensor"_a, "out"_a, "op"_a = "sum", nb::kw_only(),
           "quant"_a = nb::none(), "block"_a = nb::none(), "schedule"_a = "auto",
           "timeout"_a = nb::none(),
           nb::sig("def reduce_scatter(self, tensor: longhaul.DLPackTensor, out: "
                   "longhaul.DLPackTensor, op: str = 'sum', *, "
                   "quant: str | None = None, block: int | None = None, schedule: str = 'auto', "
                   "timeout: float | None = None) -> Work"),
           nb::rv_policy::take_ownership,
           "Starts a reduce-scatter (lh_reduce_scatter_async): `tensor` holds every member's part "
           "in ring order (group_size parts of out's size), each reduced with `op` over the group; "
           "`out` receives this member's part (ring position `rank`), written only on success. "
           "Returns a Work whose wait() returns `out`.")
      .def("allgather", &allgather, "tensor"_a, "out"_a, nb::kw_only(), "quant"_a = nb::none(),
           "block"_a = nb::none(), "schedule"_a = "auto", "timeout"_a = nb::none(),
           nb::sig("def allgather(self, tensor: longhaul.DLPackTensor, out: longhaul.DLPackTensor, "
                   "*, quant: str | None = "
                   "None, block: int | None = None, schedule: str = 'auto', timeout: float | None "
                   "= None) -> Work"),
           nb::rv_policy::take_ownership,
           "Starts an all-gather (lh_allgather_async): every member contributes `tensor`, and "
           "`out` (group_size times its size) receives every contribution in ring order. Returns "
           "a Work whose wait() returns `out`.")
      .def("broadcast", &broadcast, "tensor"_a, "root"_a = 0, nb::kw_only(), "quant"_a = nb::none(),
           "block"_a = nb::none(), "schedule"_a = "auto", "timeout"_a = nb::none(),
           nb::sig("def broadcast(self, tensor: longhaul.DLPackTensor, root: int = 0, *, quant: "
                   "str | None = "
                   "None, block: int | None = None, schedule: str = 'auto', timeout: float | None "
                   "= None) -> Work"),
           nb::rv_policy::take_ownership,
           "Starts a broadcast (lh_broadcast_async): the tensor of the member at ring position "
           "`root` ends in `tensor` on every member (in place). Returns a Work whose wait() "
           "returns `tensor`.")
      .def("barrier", &barrier, nb::kw_only(), "schedule"_a = "auto", "timeout"_a = nb::none(),
           nb::sig("def barrier(self, *, schedule: str = 'auto', timeout: float | None = None) -> "
                   "Work"),
           nb::rv_policy::take_ownership,
           "Starts a barrier (lh_barrier_async): its Work completes once every member has "
           "started it; wait() returns None.")
      .def("sparse_allgather", &sparse_allgather, "data"_a, nb::kw_only(), "schedule"_a = "auto",
           "validate"_a = nb::none(), "expected_elements"_a = nb::none(),
           "max_total_bytes"_a = nb::none(), "max_attempts"_a = 0, "segment_bytes"_a = nb::none(),
           nb::sig("def sparse_allgather(self, data: object, *, schedule: str = "
                   "'auto', validate: str | None = None, expected_elements: int | None = None, "
                   "max_total_bytes: int | None = None, max_attempts: int = 0, segment_bytes: "
                   "int | None = None) -> list[bytes]"),
           "Sparse all-gather (lh_sparse_allgather), blocking: every member contributes `data` "
           "(bytes-like, any size, empty included; the sizes are exchanged) and receives every "
           "member's contribution, returned as a list of bytes in ring order (index `rank` is "
           "this member's). validate='codec' checks each contribution as a sparse codec "
           "encoding (of `expected_elements` elements when set; an empty one is accepted); a "
           "refusal raises LonghaulError (status 'LH_ERR_PROTOCOL') naming the peer, alike on "
           "every member, with `.malformed` (the refused ring positions) and `.contributions` "
           "(the list). max_attempts >= 1 settles the call with the group (OK everywhere or "
           "nowhere), retried over the survivors. The GIL is released while it runs.");
}

}  // namespace longhaul::py
