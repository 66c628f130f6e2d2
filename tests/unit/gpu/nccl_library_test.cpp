// NCCL is loaded at run time, locally, from where the environment says; without it the error says
// what was tried. ctest runs this binary twice (tests/unit/gpu/CMakeLists.txt): once with
// LONGHAUL_NCCL_LIBRARY at the nvidia-nccl-cu13 wheel's library (no GPU needed to load it and ask
// its version), once at a path that does not exist.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gpu/nccl_library.hpp"

namespace longhaul::gpu {
namespace {

TEST(NcclLibrary, LoadsTheNamedNcclLocallyAndReadsItsVersion) {
  const char* path = std::getenv("LONGHAUL_NCCL_LIBRARY");
  if (path == nullptr || *path == '\0')
    GTEST_SKIP() << "no nvidia-nccl-cu13 wheel was found when this build was configured";
  auto nccl = load_nccl();
  ASSERT_TRUE(nccl.is_ok()) << nccl.status().message();
  EXPECT_GE(nccl->version, 21400);
  EXPECT_FALSE(nccl->reused);
  EXPECT_NE(nccl->path.find("libnccl.so"), std::string::npos) << nccl->path;
  // RTLD_LOCAL: its symbols did not join the process's global namespace.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "ncclGetVersion"), nullptr);
  // Loaded once: a second call answers the same.
  EXPECT_EQ(load_nccl()->version, nccl->version);
}

TEST(NcclLibrary, WithoutNcclTheErrorSaysWhatWasTried) {
  auto nccl = load_nccl();
  if (nccl.is_ok()) GTEST_SKIP() << "an NCCL is on the loader's search path: " << nccl->path;
  EXPECT_EQ(nccl.status().code(), LH_ERR_UNSUPPORTED);
  EXPECT_NE(nccl.status().message().find("/nonexistent/libnccl.so.2"), std::string::npos)
      << nccl.status().message();
  EXPECT_NE(nccl.status().message().find("nvidia-nccl-cu13"), std::string::npos);
}

}  // namespace
}  // namespace longhaul::gpu
