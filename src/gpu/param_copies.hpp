// The sync engine's copies of parameters in device memory (sync/device_copies.hpp) through the
// GPU layer: a pinned mirror and the device's copy stream (device_memory.hpp). Without a usable
// device (or built without CUDA) the mirror cannot be taken, and the engine's start fails with
// "no CUDA device: ...".
#pragma once

#include <memory>

#include "sync/device_copies.hpp"

namespace longhaul::gpu {

std::shared_ptr<sync::DeviceCopies> device_param_copies();

}  // namespace longhaul::gpu
