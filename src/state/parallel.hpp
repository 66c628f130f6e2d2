// Data parallelism for hashing and compression: one process-wide pool of worker threads, sized to
// the machine, that parallel_for() spreads independent items over.
#pragma once

#include <cstddef>
#include <functional>

namespace longhaul::state {

// Runs body(i) for every i in [0, n), spread over the pool's threads and the calling thread, and
// returns when all are done. body must not throw and may run concurrently with itself. Calls may
// nest or run concurrently from several threads: the caller always works too, so progress never
// depends on a free worker.
void parallel_for(size_t n, const std::function<void(size_t)>& body);

// Threads that parallel_for uses (workers + the caller).
size_t parallelism();

}  // namespace longhaul::state
