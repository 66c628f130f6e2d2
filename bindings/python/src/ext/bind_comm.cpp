// Python bindings of Communicator, Work, all-reduce and the shared-state sync.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>

#include "bindings.hpp"
#include "comm.hpp"
#include "errors.hpp"
#include "tensors.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace longhaul::py {
namespace {

void set_str(const char*& field, const std::optional<std::string>& v) {
  if (v) field = v->c_str();
}

// comm.allreduce(tensor, op, quant=, out=, ...): starts it and returns a Work.
Work* allreduce(Communicator& comm, nb::handle tensor, const std::string& op, nb::handle quant,
                nb::handle out, std::optional<uint32_t> block, const std::string& schedule,
                nb::handle residual, bool restore_input, std::optional<double> timeout) {
  const lh_reduce_op rop = parse_op(op);
  lh_allreduce_options o = collective_options(quant, block, schedule, timeout);
  o.restore_input = restore_input ? 1 : 0;
  const bool in_place = out.is_none();
  TensorView send = import_tensor(tensor, /*writable=*/in_place, "tensor");
  TensorView recv = in_place ? send : import_tensor(out, /*writable=*/true, "out");
  std::vector<nb::object> keep{send.keep, recv.keep};
  if (!in_place && (recv.dtype != send.dtype || recv.count != send.count))
    throw nb::value_error("out must have the tensor's dtype and number of elements");
  if (!residual.is_none()) {
    TensorView r = import_tensor(residual, /*writable=*/true, "residual");
    if (r.dtype != LH_DTYPE_F32 || r.count != send.count)
      throw nb::value_error("residual must be float32 with the tensor's number of elements");
    o.residual = static_cast<float*>(r.data);
    keep.push_back(r.keep);
  }
  lh_comm* c = comm.handle();
  lh_op* handle = nullptr;
  const lh_status s =
      lh_allreduce_async(c, send.data, recv.data, send.count, send.dtype, rop, &o, &handle);
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
  return new Work(handle, nb::borrow(in_place ? tensor : out), std::move(keep));
}

void allreduce_batch(Communicator& comm, nb::handle tensors, const std::string& op,
                     nb::handle quant, std::optional<uint32_t> block, uint32_t max_attempts) {
  const lh_reduce_op rop = parse_op(op);
  const lh_allreduce_options o = collective_options(quant, block, "auto");
  std::vector<TensorView> views;
  for (nb::handle t : tensors)
    views.push_back(import_tensor(t, true, "tensors[" + std::to_string(views.size()) + "]"));
  std::vector<const void*> sends;
  std::vector<void*> recvs;
  std::vector<size_t> counts;
  for (const TensorView& v : views) {
    if (v.dtype != views[0].dtype)
      throw nb::type_error("tensors: every tensor needs the same dtype");
    sends.push_back(v.data);
    recvs.push_back(v.data);
    counts.push_back(v.count);
  }
  lh_comm* c = comm.handle();
  const lh_dtype dtype = views.empty() ? LH_DTYPE_F32 : views[0].dtype;
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_allreduce_batch(c, sends.data(), recvs.data(), counts.data(), views.size(), dtype, rop,
                           &o, max_attempts);
  }
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
}

// The same all-reduce `iterations` times from C++, without Python between the calls: the
// baseline of bench/e2e/python's per-call overhead. Returns the seconds per call.
double allreduce_loop(Communicator& comm, nb::handle tensor, uint32_t iterations) {
  TensorView v = import_tensor(tensor, /*writable=*/true, "tensor");
  lh_comm* c = comm.handle();
  lh_status s = LH_OK;
  nb::gil_scoped_release unlocked;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < iterations && s == LH_OK; ++i)
    s = lh_allreduce(c, v.data, v.data, v.count, v.dtype, LH_OP_SUM, nullptr, nullptr);
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  nb::gil_scoped_acquire locked;
  if (s != LH_OK) raise_status(s, lh_comm_last_error(c));
  return dt.count() / std::max<uint32_t>(iterations, 1);
}

lh_sync_strategy parse_strategy(const std::string& s) {
  if (s == "enforce_popular") return LH_SYNC_ENFORCE_POPULAR;
  if (s == "receive_only") return LH_SYNC_RECEIVE_ONLY;
  if (s == "send_only") return LH_SYNC_SEND_ONLY;
  throw nb::value_error(
      ("strategy must be 'enforce_popular', 'receive_only' or 'send_only', not '" + s + "'")
          .c_str());
}

// One registry per call: the tensors are matched by name, so a dict maps onto it directly.
lh_sync_info sync_state(Communicator& comm, nb::dict tensors, uint64_t revision,
                        const std::string& strategy) {
  const lh_sync_strategy st = parse_strategy(strategy);
  std::vector<TensorView> views;
  lh_state* state = nullptr;
  check(lh_state_create(&state));
  std::unique_ptr<lh_state, void (*)(lh_state*)> owner(state, lh_state_destroy);
  for (auto [k, v] : tensors) {
    if (!nb::isinstance<nb::str>(k)) throw nb::type_error("sync_state: the keys must be str");
    const std::string name = nb::cast<std::string>(k);
    views.push_back(import_tensor(v, /*writable=*/true, "tensors['" + name + "']"));
    check(lh_state_add_tensor(state, name.c_str(), views.back().data, views.back().count,
                              views.back().dtype));
  }
  check(lh_state_set_revision(state, revision));
  lh_comm* c = comm.handle();
  lh_sync_info info{};
  lh_status s;
  {
    nb::gil_scoped_release unlocked;
    s = lh_sync_state(c, state, st, &info);
  }
  if (s != LH_OK) raise_status(s, lh_state_last_error(state));
  return info;
}

using CommClass = nb::class_<Communicator>;

// The constructor (every lh_comm_options field, torchrun's defaults) and the membership calls.
void define_construction(CommClass& comm) {
  comm.def(
          "__init__",
          [](Communicator* self, const std::string& master_address,
             std::optional<uint32_t> peer_group, std::optional<std::string> node,
             std::optional<uint32_t> node_rail, std::optional<uint32_t> node_rails,
             std::optional<std::string> secret, std::optional<uint32_t> connections_per_link,
             std::optional<uint32_t> connect_timeout_ms, std::optional<uint32_t> link_timeout_ms,
             std::optional<uint32_t> handshake_timeout_ms, std::optional<uint32_t> io_threads,
             std::optional<bool> full_mesh, std::optional<std::string> listen_address,
             std::optional<std::string> advertised_address,
             std::optional<uint32_t> state_stall_timeout_ms,
             std::optional<uint32_t> master_reconnect_timeout_ms,
             std::optional<uint32_t> link_upload_mbit, std::optional<uint32_t> min_peers,
             const std::string& on_eviction) {
            lh_comm_options o;
            lh_comm_options_init(&o);  // node, rail and group from torchrun's environment
            o.master_address = master_address.c_str();
            set_if(o.peer_group, peer_group);
            set_str(o.node, node);
            set_if(o.node_rail, node_rail);
            set_if(o.node_rails, node_rails);
            if (node_rail && !peer_group) o.peer_group = *node_rail;
            set_str(o.secret, secret);
            set_if(o.connections_per_link, connections_per_link);
            set_if(o.connect_timeout_ms, connect_timeout_ms);
            set_if(o.link_timeout_ms, link_timeout_ms);
            set_if(o.handshake_timeout_ms, handshake_timeout_ms);
            set_if(o.io_threads, io_threads);
            if (full_mesh) o.full_mesh = *full_mesh ? 1 : 0;
            set_str(o.listen_address, listen_address);
            set_str(o.advertised_address, advertised_address);
            set_if(o.state_stall_timeout_ms, state_stall_timeout_ms);
            set_if(o.master_reconnect_timeout_ms, master_reconnect_timeout_ms);
            set_if(o.link_upload_mbit, link_upload_mbit);
            set_if(o.min_peers, min_peers);
            new (self) Communicator(o);
            self->set_on_eviction(on_eviction);
          },
          "master_address"_a, nb::kw_only(), "peer_group"_a = nb::none(), "node"_a = nb::none(),
          "node_rail"_a = nb::none(), "node_rails"_a = nb::none(), "secret"_a = nb::none(),
          "connections_per_link"_a = nb::none(), "connect_timeout_ms"_a = nb::none(),
          "link_timeout_ms"_a = nb::none(), "handshake_timeout_ms"_a = nb::none(),
          "io_threads"_a = nb::none(), "full_mesh"_a = nb::none(), "listen_address"_a = nb::none(),
          "advertised_address"_a = nb::none(), "state_stall_timeout_ms"_a = nb::none(),
          "master_reconnect_timeout_ms"_a = nb::none(), "link_upload_mbit"_a = nb::none(),
          "min_peers"_a = nb::none(), "on_eviction"_a = "raise", doc::comm_init)
      .def(
          "connect",
          [](nb::handle self) {
            nb::cast<Communicator&>(self).connect();
            return nb::borrow(self);
          },
          nb::sig("def connect(self) -> Communicator"), doc::connect)
      .def("update_topology", &Communicator::update_topology, doc::update_topology)
      .def("wait_for_peers", &Communicator::wait_for_peers, "n"_a, "timeout"_a = nb::none(),
           doc::wait_for_peers)
      .def("peers_pending", &Communicator::peers_pending, doc::peers_pending)
      .def("close", &Communicator::close, "reason"_a = "closed", doc::close)
      .def_prop_ro("closed", &Communicator::closed, "Whether close() ran.");
}

// What a communicator reports: attributes, node, traffic, the last abort; the context manager.
void define_properties(CommClass& comm) {
  comm.def_prop_ro(
          "world_size", [](const Communicator& c) { return c.attribute(LH_ATTR_WORLD_SIZE); },
          "Peers in the current epoch, every group.")
      .def_prop_ro(
          "group_size", [](const Communicator& c) { return c.attribute(LH_ATTR_GROUP_WORLD_SIZE); },
          "Peers in this communicator's group (the nodes reducing this rail).")
      .def_prop_ro(
          "rank", [](const Communicator& c) { return c.attribute(LH_ATTR_RANK); },
          "This peer's position in its group's ring, 0-based.")
      .def_prop_ro(
          "epoch", [](const Communicator& c) { return c.attribute(LH_ATTR_EPOCH); },
          "The current epoch (0 before admission; grows with every membership change).")
      .def_prop_ro(
          "peer_id", [](const Communicator& c) { return c.attribute(LH_ATTR_PEER_ID); },
          "This peer's id, unique in the run.")
      .def_prop_ro(
          "group_count", [](const Communicator& c) { return c.attribute(LH_ATTR_GROUP_COUNT); },
          "Peer groups with at least one peer.")
      .def_prop_ro(
          "abort_count", [](const Communicator& c) { return c.attribute(LH_ATTR_ABORT_COUNT); },
          "Aborts the master pushed to this peer so far.")
      .def_prop_ro(
          "listen_port", [](const Communicator& c) { return c.attribute(LH_ATTR_LISTEN_PORT); },
          "The port of this peer's data listener.")
      .def_prop_ro("ring", &Communicator::ring, "The peer ids of this group's ring, in ring order.")
      .def_prop_ro("node", &Communicator::node, "This rank's node ('' for a node of one rail).")
      .def_prop_ro("node_rail", &Communicator::node_rail, "This rank's rail within its node.")
      .def_prop_ro("node_rails", &Communicator::node_rails, "The node's number of rails.")
      .def_prop_ro("peer_group", &Communicator::peer_group, "The peer group (normally the rail).")
      .def_prop_ro(
          "traffic",
          [](const Communicator& c) {
            const lh_traffic t = c.traffic();
            nb::dict d;
            d["data_sent"] = t.data_sent;
            d["data_received"] = t.data_received;
            d["control_sent"] = t.control_sent;
            d["control_received"] = t.control_received;
            d["state_sent"] = t.state_sent;
            d["state_received"] = t.state_received;
            return d;
          },
          nb::sig("def traffic(self) -> dict[str, int]"), doc::traffic)
      .def_prop_rw("on_eviction", &Communicator::on_eviction, &Communicator::set_on_eviction,
                   doc::on_eviction)
      .def_prop_ro(
          "last_abort",
          [](const Communicator& c) -> nb::object {
            const auto a = c.last_abort();
            if (!a) return nb::none();
            return nb::make_tuple(a->epoch, lh_status_string(a->status), a->reason);
          },
          nb::sig("def last_abort(self) -> tuple[int, str, str] | None"), doc::last_abort)
      .def(
          "__enter__", [](nb::handle self) { return nb::borrow(self); },
          nb::sig("def __enter__(self) -> Communicator"))
      .def(
          "__exit__",
          [](Communicator& c, nb::handle, nb::handle, nb::handle) { c.close("closed"); },
          "exc_type"_a.none(), "exc"_a.none(), "tb"_a.none());
}

void define_collectives(CommClass& comm) {
  comm.def("allreduce", &allreduce, "tensor"_a, "op"_a = "sum", nb::kw_only(),
           "quant"_a = nb::none(), "out"_a = nb::none(), "block"_a = nb::none(),
           "schedule"_a = "auto", "residual"_a = nb::none(), "restore_input"_a = true,
           "timeout"_a = nb::none(),
           nb::sig("def allreduce(self, tensor: longhaul.DLPackTensor, op: str = 'sum', *, "
                   "quant: str | None = None, out: longhaul.DLPackTensor | None = None, "
                   "block: int | None = None, schedule: str = 'auto', "
                   "residual: longhaul.DLPackTensor | None = None, restore_input: bool = True, "
                   "timeout: float | None = None) -> Work"),
           nb::rv_policy::take_ownership, doc::allreduce)
      .def("allreduce_batch", &allreduce_batch, "tensors"_a, "op"_a = "sum", nb::kw_only(),
           "quant"_a = nb::none(), "block"_a = nb::none(), "max_attempts"_a = 3,
           nb::sig("def allreduce_batch(self, tensors: "
                   "collections.abc.Sequence[longhaul.DLPackTensor], op: str = "
                   "'sum', "
                   "*, quant: str | None = None, block: int | None = None, max_attempts: int = 3) "
                   "-> None"),
           doc::allreduce_batch)
      .def("_allreduce_loop", &allreduce_loop, "tensor"_a, "iterations"_a,
           "Benchmark helper: `iterations` in-place sum all-reduces from C++; seconds per call.")
      .def("sync_state", &sync_state, "tensors"_a, "revision"_a = 0,
           "strategy"_a = "enforce_popular", doc::sync_state);
}

// What the calls return: a Work per operation, a SyncInfo per sync.
void bind_results(nb::module_& m) {
  nb::class_<Work>(m, "Work", doc::work)
      .def("wait", &Work::wait, "timeout"_a = nb::none(),
           nb::sig("def wait(self, timeout: float | None = None) -> longhaul.DLPackTensor"),
           doc::wait)
      .def("cancel", &Work::cancel, doc::cancel)
      .def("done", &Work::done, "Whether the operation has completed (never blocks).")
      .def_prop_ro(
          "info",
          [](const Work& w) {
            const lh_op_info i = w.info();
            nb::dict d;
            d["bytes_sent"] = i.bytes_sent;
            d["bytes_received"] = i.bytes_received;
            d["world_size"] = i.world_size;
            d["schedule"] = i.schedule == LH_SCHEDULE_DIRECT ? "direct" : "ring";
            return d;
          },
          nb::sig("def info(self) -> dict[str, int | str]"),
          "Payload bytes sent and received, the world size and the schedule (final once done).");

  nb::class_<lh_sync_info>(m, "SyncInfo", "What one sync_state did on this peer.")
      .def_ro("tx_bytes", &lh_sync_info::tx_bytes, "Tensor bytes served to others (after zstd).")
      .def_ro("rx_bytes", &lh_sync_info::rx_bytes, "Tensor bytes fetched (after zstd).")
      .def_ro("blocks_fetched", &lh_sync_info::blocks_fetched, "1 MiB blocks fetched and verified.")
      .def_ro("sources", &lh_sync_info::sources, "Distinct peers fetched from.")
      .def_ro("revision", &lh_sync_info::revision, "The state's revision afterwards.");
}

}  // namespace

void bind_comm(nb::module_& m) {
  CommClass comm(m, "Communicator", doc::communicator);
  define_construction(comm);
  define_properties(comm);
  define_collectives(comm);
  define_gathering(comm);
  bind_results(m);
}

}  // namespace longhaul::py
