#include "train/threads.hpp"

#include <omp.h>

#include <thread>

namespace longhaul::train {

void set_thread_count(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  omp_set_num_threads(threads);
}

int thread_count() {
  return omp_get_max_threads();
}

}  // namespace longhaul::train
