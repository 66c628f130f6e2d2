// One knob for the trainer's parallelism: OpenMP runs the elementwise and reduction kernels,
// OpenBLAS the matrix products; both get the same thread count.
#pragma once

namespace longhaul::train {

// threads <= 0 means one per hardware thread of the machine.
void set_thread_count(int threads);
int thread_count();

}  // namespace longhaul::train
