#include "errors.hpp"

namespace nb = nanobind;

namespace longhaul::py {
namespace {

// The exception types, created once at import; owned by the module (kept alive by it).
struct Types {
  PyObject* base = nullptr;
  PyObject* peer_failure = nullptr;
  PyObject* node_evicted = nullptr;
  PyObject* state_layout = nullptr;
  PyObject* timeout = nullptr;
  PyObject* closed = nullptr;
  PyObject* unsupported = nullptr;
  PyObject* master_unreachable = nullptr;
  PyObject* mismatch = nullptr;
};
Types types;

PyObject* make(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("longhaul.") + name;
  PyObject* t = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!t) throw nb::python_error();
  m.attr(name) = nb::borrow(t);  // the module holds a reference; ours stays valid with it
  Py_DECREF(t);
  return t;
}

PyObject* type_for(lh_status status) {
  switch (status) {
    case LH_ERR_PEER_LOST:
    case LH_ERR_ABORTED:
      return types.peer_failure;
    case LH_ERR_NODE_EVICTED:
      return types.node_evicted;
    case LH_ERR_STATE_MISMATCH:
      return types.state_layout;
    case LH_ERR_TIMEOUT:
      return types.timeout;
    case LH_ERR_CLOSED:
      return types.closed;
    case LH_ERR_UNSUPPORTED:
      return types.unsupported;
    case LH_ERR_MISMATCH:
      return types.mismatch;
    default:
      return types.base;
  }
}

}  // namespace

void register_errors(nb::module_& m) {
  types.base = make(m, "LonghaulError", PyExc_RuntimeError,
                    "Base of longhaul's errors; `.status` names the library's status code.");
  types.peer_failure =
      make(m, "PeerFailure", types.base,
           "A peer or link was lost, or the master aborted the operation: retryable. Call "
           "Communicator.update_topology() and run the collective again.");
  types.node_evicted =
      make(m, "NodeEvicted", types.base,
           "Another rank of this node died or left, so the master evicted the whole node. The "
           "communicator is finished: end this node's ranks and start the node again.");
  types.state_layout =
      make(m, "StateLayoutError", types.base,
           "Shared state differs from the group's in names, types, sizes or revision.");
  PyObject* timeout_bases = PyTuple_Pack(2, types.base, PyExc_TimeoutError);
  types.timeout = make(m, "Timeout", timeout_bases, "A deadline passed (also a TimeoutError).");
  Py_DECREF(timeout_bases);
  types.closed = make(m, "Closed", types.base, "The object was closed.");
  PyObject* unsupported_bases = PyTuple_Pack(2, types.base, PyExc_ValueError);
  types.unsupported = make(m, "Unsupported", unsupported_bases,
                           "A valid request this build or configuration cannot serve "
                           "(also a ValueError).");
  Py_DECREF(unsupported_bases);
  PyObject* unreachable_bases = PyTuple_Pack(2, types.base, PyExc_ConnectionError);
  types.master_unreachable =
      make(m, "MasterUnreachable", unreachable_bases,
           "connect() could not reach the master (also a ConnectionError). Not a PeerFailure: "
           "update_topology() cannot mend it; check the address, that the master runs, and the "
           "network, then create a new Communicator.");
  Py_DECREF(unreachable_bases);
  types.mismatch =
      make(m, "Mismatch", types.base,
           "The members called one collective with different arguments (kind, dtype, reduce "
           "op, codec, block, schedule, root or counts); the message names the field and the "
           "members. Every member raises it and no output was written. Not a PeerFailure: "
           "retrying the same calls fails again; fix the program.");
}

namespace {
[[noreturn]] void raise_as(PyObject* type_object, lh_status status, const char* message) {
  nb::object type = nb::borrow(type_object);
  nb::object exc = type(nb::str(message));
  exc.attr("status") = nb::str(lh_status_string(status));
  PyErr_SetObject(type.ptr(), exc.ptr());
  throw nb::python_error();
}
}  // namespace

void raise_status(lh_status status, const char* message) {
  if (status == LH_ERR_INVALID_ARGUMENT) throw nb::value_error(message);
  raise_as(type_for(status), status, message);
}

void raise_master_unreachable(const char* message) {
  raise_as(types.master_unreachable, LH_ERR_PEER_LOST, message);
}

void raise_timeout(const char* message) {
  raise_status(LH_ERR_TIMEOUT, message);
}

}  // namespace longhaul::py
