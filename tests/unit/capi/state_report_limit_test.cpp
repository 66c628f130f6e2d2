// A state whose report cannot fit a control message (16 MiB) fails lh_sync_state at once with the
// report's size and what to do (issue 24, item 7); the old tree's session dropped the oversized
// message without a word and the call waited for a plan that never came.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include <longhaul/longhaul.h>

namespace {

using namespace std::chrono_literals;

TEST(StateReportLimit, AReportLargerThanAControlMessageFailsAtOnceWithItsSize) {
  lh_master_options mo;
  lh_master_options_init(&mo);
  mo.listen_address = "127.0.0.1:0";
  lh_master* master = nullptr;
  ASSERT_EQ(lh_master_create(&mo, &master), LH_OK) << lh_last_error();
  ASSERT_EQ(lh_master_run(master), LH_OK);
  uint16_t port = 0;
  ASSERT_EQ(lh_master_port(master, &port), LH_OK);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = address.c_str();
  o.listen_address = "127.0.0.1:0";
  lh_comm* comm = nullptr;
  ASSERT_EQ(lh_comm_create(&o, &comm), LH_OK) << lh_last_error();
  ASSERT_EQ(lh_comm_connect(comm), LH_OK) << lh_comm_last_error(comm);

  // 20,000 tensors of one float under 1000-byte names: ~20 MB of report, within the master's
  // 65,536-tensor limit.
  constexpr size_t kTensors = 20000;
  std::vector<float> values(kTensors, 1.0f);
  lh_state* state = nullptr;
  ASSERT_EQ(lh_state_create(&state), LH_OK);
  for (size_t i = 0; i < kTensors; ++i) {
    char prefix[16];
    std::snprintf(prefix, sizeof prefix, "%07zu", i);
    const std::string name = prefix + std::string(993, 'n');
    ASSERT_EQ(lh_state_add_tensor(state, name.c_str(), &values[i], 1, LH_DTYPE_F32), LH_OK)
        << lh_last_error();
  }
  lh_sync_info info;
  auto sync = std::async(std::launch::async, [&] {
    return lh_sync_state(comm, state, LH_SYNC_ENFORCE_POPULAR, &info);
  });
  if (sync.wait_for(20s) != std::future_status::ready) {
    std::fprintf(stderr, "lh_sync_state did not return within 20 s\n");
    std::_Exit(1);  // the call cannot be abandoned cleanly
  }
  EXPECT_EQ(sync.get(), LH_ERR_UNSUPPORTED);
  const std::string message = lh_state_last_error(state);
  std::fprintf(stderr, "%s\n", message.c_str());
  EXPECT_NE(message.find("20000 tensors"), std::string::npos) << message;
  EXPECT_NE(message.find("16777216"), std::string::npos) << message;
  lh_state_destroy(state);
  lh_comm_destroy(comm);
  lh_master_destroy(master);
}

}  // namespace
