#include "gpu/nccl_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace longhaul::gpu {

namespace {

// The entry points, by name: resolving them all at load time means an NCCL without one of them is
// refused once, with its name, rather than failing in the middle of a collective.
constexpr const char* kSymbols[] = {"ncclGetVersion", "ncclGetUniqueId",   "ncclCommInitRankConfig",
                                    "ncclCommAbort",  "ncclCommDestroy",   "ncclCommGetAsyncError",
                                    "ncclAllReduce",  "ncclReduceScatter", "ncclAllGather",
                                    "ncclGroupStart", "ncclGroupEnd",      "ncclGetErrorString",
                                    "ncclReduce",     "ncclBroadcast"};

struct Loaded {
  void* handle = nullptr;
  NcclInfo info;
};

// The loaded library's handle, once load_once has succeeded.
std::atomic<void*> g_handle{nullptr};

// dlopen with RTLD_NOLOAD first: a copy the process already has (PyTorch's) is reused.
Result<Loaded> open_library() {
  const std::string soname = "libnccl.so.2";
  Loaded l;
  if ((l.handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) != nullptr) {
    l.info.reused = true;
    return l;
  }
  std::vector<std::string> tried;
  if (const char* env = std::getenv("LONGHAUL_NCCL_LIBRARY"); env && *env) {
    if ((l.handle = dlopen(env, RTLD_NOW | RTLD_LOCAL)) != nullptr) return l;
    tried.push_back(fmt::format("LONGHAUL_NCCL_LIBRARY={} ({})", env, dlerror()));
  }
  if ((l.handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) return l;
  tried.push_back(fmt::format("{} on the loader's search path ({})", soname, dlerror()));
  std::string why;
  for (const std::string& t : tried) why += (why.empty() ? "" : "; ") + t;
  return Status(LH_ERR_UNSUPPORTED,
                fmt::format("no NCCL: tried {} (pip install nvidia-nccl-cu13, or set "
                            "LONGHAUL_NCCL_LIBRARY to a libnccl.so.2)",
                            why));
}

Result<NcclInfo> load_once() {
  auto l = open_library();
  if (!l) return l.status();
  for (const char* name : kSymbols)
    if (dlsym(l->handle, name) == nullptr)
      return Status(LH_ERR_UNSUPPORTED,
                    fmt::format("NCCL lacks {} (longhaul needs NCCL 2.14 or later)", name));
  link_map* map = nullptr;
  if (dlinfo(l->handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) l->info.path = map->l_name;
  using GetVersion = int (*)(int*);
  const auto get_version = reinterpret_cast<GetVersion>(dlsym(l->handle, "ncclGetVersion"));
  if (int rc = get_version(&l->info.version); rc != 0)
    return Status(LH_ERR_INTERNAL, fmt::format("ncclGetVersion failed with {}", rc));
  g_handle.store(l->handle);
  return l->info;  // the handle stays open for the process's life
}

}  // namespace

Result<NcclInfo> load_nccl() {
  static const Result<NcclInfo> loaded = load_once();
  return loaded;
}

void* nccl_symbol(const char* name) {
  if (!load_nccl()) return nullptr;
  return dlsym(g_handle.load(), name);
}

}  // namespace longhaul::gpu
