// The pieces of the _longhaul module, and the docstrings they share.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>

namespace longhaul::py {

class Communicator;

// Sets an options field from a keyword argument the caller passed; None keeps the C default.
template <typename T>
void set_if(T& field, const std::optional<T>& v) {
  if (v) field = *v;
}

void bind_comm(nanobind::module_& m);
void bind_engine(nanobind::module_& m);
void bind_local_group(nanobind::module_& m);
// Communicator.reduce_scatter, .allgather, .broadcast, .barrier (bind_gather.cpp).
void define_gathering(nanobind::class_<Communicator>& comm);

namespace doc {
extern const char* const communicator;
extern const char* const comm_init;
extern const char* const wait_for_peers;
extern const char* const connect;
extern const char* const update_topology;
extern const char* const peers_pending;
extern const char* const close;
extern const char* const traffic;
extern const char* const on_eviction;
extern const char* const last_abort;
extern const char* const allreduce;
extern const char* const allreduce_batch;
extern const char* const sync_state;
extern const char* const work;
extern const char* const cancel;
extern const char* const wait;
extern const char* const engine;
extern const char* const engine_init;
}  // namespace doc

}  // namespace longhaul::py
