// One knob for the trainer's parallelism: the OpenMP thread count. Every kernel, the matrix
// products included (single-threaded OpenBLAS calls on tiles, see blas.hpp), runs on that pool.
#pragma once

namespace longhaul::train {

// threads <= 0 means one per hardware thread of the machine.
void set_thread_count(int threads);
int thread_count();

}  // namespace longhaul::train
