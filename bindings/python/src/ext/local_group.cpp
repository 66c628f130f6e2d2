#include "local_group.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <utility>

#include "bindings.hpp"
#include "errors.hpp"
#include "tensors.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace longhaul::py {

LocalGroup::LocalGroup(nb::object comm_obj, const lh_local_group_options& options)
    : comm_obj_(std::move(comm_obj)), comm_(nb::cast<Communicator*>(comm_obj_)) {
  lh_comm* c = comm_->handle();
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_local_group_create(c, &options, &group_);
  }
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
  comm_->attach(this);
}

LocalGroup::~LocalGroup() {
  destroy();
}

void LocalGroup::destroy() {
  lh_local_group* g = nullptr;
  {
    nb::gil_scoped_release unlocked;
    {
      // A call in progress may wait on a sibling (agreements have no deadline): end the group
      // first, so that call returns and the exclusive lock below is not a deadlock.
      std::shared_lock call(mu_);
      if (group_) (void)lh_local_group_abort(group_, "the group was closed");
    }
    std::unique_lock exclusive(mu_);
    g = std::exchange(group_, nullptr);
    lh_local_group_destroy(g);
  }
  if (g) comm_->detach(this);
}

namespace {

[[noreturn]] void raise_closed() {
  raise_status(LH_ERR_CLOSED, "the local group was closed (or its communicator was)");
}

}  // namespace

nb::object LocalGroup::allreduce(nb::handle tensor, const std::string& op, nb::handle quant,
                                 std::optional<uint32_t> block, uint32_t max_attempts) {
  const lh_reduce_op rop = parse_op(op);
  const lh_allreduce_options o = collective_options(quant, block, "auto");
  TensorView v = import_tensor(tensor, /*writable=*/true, "tensor");
  lh_status s = LH_OK;
  std::string error;
  bool closed = false;
  {
    nb::gil_scoped_release unlocked;
    std::shared_lock call(mu_);
    closed = group_ == nullptr;
    if (!closed) {
      s = lh_node_allreduce(group_, v.data, v.data, v.count, v.dtype, rop, &o, max_attempts);
      if (s != LH_OK) error = lh_last_error();  // this thread's, before another call replaces it
    }
  }
  if (closed) raise_closed();
  if (s != LH_OK) raise_status(s, error.c_str());
  return nb::borrow(tensor);
}

void LocalGroup::abort(const std::string& reason) {
  lh_status s = LH_OK;
  bool closed = false;
  {
    nb::gil_scoped_release unlocked;
    std::shared_lock call(mu_);
    closed = group_ == nullptr;
    if (!closed) s = lh_local_group_abort(group_, reason.c_str());
  }
  if (closed) raise_closed();
  check(s);
}

void bind_local_group(nb::module_& m) {
  nb::class_<LocalGroup>(
      m, "LocalGroup",
      "The local group of a communicator's node: its ranks (one process per rail of this "
      "machine) reducing among themselves through shared memory, for the hierarchical "
      "all-reduce of replicas inside a node (docs/collectives.md, 'Node-local groups').")
      .def(
          "__init__",
          [](LocalGroup* self, nb::object comm, std::optional<std::string> name,
             std::optional<size_t> slot_bytes, std::optional<uint32_t> timeout_ms,
             std::optional<int> cuda_device) {
            lh_local_group_options o;
            lh_local_group_options_init(&o);
            if (name) o.name = name->c_str();
            set_if(o.slot_bytes, slot_bytes);
            set_if(o.timeout_ms, timeout_ms);
            if (cuda_device) {
              o.memory = LH_MEMORY_CUDA;
              o.device = *cuda_device;
            }
            new (self) LocalGroup(std::move(comm), o);
          },
          "comm"_a, nb::kw_only(), "name"_a = nb::none(), "slot_bytes"_a = nb::none(),
          "timeout_ms"_a = nb::none(), "cuda_device"_a = nb::none(),
          nb::sig("def __init__(self, comm: Communicator, *, name: str | None = None, "
                  "slot_bytes: int | None = None, timeout_ms: int | None = None, "
                  "cuda_device: int | None = None) -> None"),
          "Forms the group: blocks until every rank of the node (comm's node_rails) has "
          "come, LonghaulError(LH_ERR_TIMEOUT) after timeout_ms naming the missing ones. From "
          "then on the master's eviction of the node, or a sibling's death, ends it on every "
          "rank. name: the shared-memory name (default: from the master's address and the node). "
          "cuda_device: run the local steps in NCCL on that device (-1: the current one); "
          "tensors must then be CUDA tensors. None: shared memory.")
      .def("allreduce", &LocalGroup::allreduce, "tensor"_a, "op"_a = "sum", nb::kw_only(),
           "quant"_a = nb::none(), "block"_a = nb::none(), "max_attempts"_a = 3,
           nb::sig(
               "def allreduce(self, tensor: longhaul.DLPackTensor, op: str = 'sum', *, quant: str "
               "| None = "
               "None, block: int | None = None, max_attempts: int = 3) -> longhaul.DLPackTensor"),
           "All-reduces `tensor` in place over every rank of every node (lh_node_allreduce): "
           "summed inside the node, chunk r over rail r, gathered back. All or nothing, retried "
           "over the survivors up to max_attempts; returns the tensor. On failure it holds what "
           "it held before; LonghaulError with status LH_ERR_NODE_EVICTED means the node is "
           "finished (a sibling died).")
      .def("abort", &LocalGroup::abort, "reason"_a,
           "Ends the group on every rank of the node: their calls raise LH_ERR_ABORTED.")
      .def("close", &LocalGroup::destroy, "Frees the group (siblings' calls fail). Idempotent.")
      .def(
          "__enter__", [](nb::handle self) { return nb::borrow(self); },
          nb::sig("def __enter__(self) -> LocalGroup"))
      .def(
          "__exit__", [](LocalGroup& self, nb::handle, nb::handle, nb::handle) { self.destroy(); },
          "exc_type"_a.none(), "exc"_a.none(), "tb"_a.none());
}

}  // namespace longhaul::py
