#include "runtime/runtime.hpp"

namespace longhaul::runtime {

Runtime::Runtime(const RuntimeOptions& options)
    : io_(options.io_threads ? options.io_threads : 2), workers_(options.workers) {}

}  // namespace longhaul::runtime
