// A communicator's node identity: the launcher's environment and the checks on a claim.
#include "peer/node_identity.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace longhaul::peer {
namespace {

// Sets (or, with nullptr, unsets) an environment variable for one test and restores it after.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvVar() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(NodeIdentity, TheLauncherEnvironmentNamesTheNodeAndRail) {
  EnvVar rank("LOCAL_RANK", "3"), size("LOCAL_WORLD_SIZE", "8"), group("GROUP_RANK", "5");
  auto id = node_from_environment();
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->node, "5");
  EXPECT_EQ(id->rail, 3u);
  EXPECT_EQ(id->rails, 8u);
}

TEST(NodeIdentity, WithoutGroupRankTheHostNamesTheNode) {
  EnvVar rank("LOCAL_RANK", "0"), size("LOCAL_WORLD_SIZE", "2"), group("GROUP_RANK", nullptr);
  auto id = node_from_environment();
  ASSERT_TRUE(id.has_value());
  EXPECT_FALSE(id->node.empty());
}

TEST(NodeIdentity, WithoutALauncherAProcessIsANodeOfOne) {
  EnvVar rank("LOCAL_RANK", nullptr), size("LOCAL_WORLD_SIZE", "2");
  EXPECT_FALSE(node_from_environment().has_value());
  EnvVar garbage("LOCAL_RANK", "first");
  EXPECT_FALSE(node_from_environment().has_value());
}

TEST(NodeIdentity, ImpossibleClaimsAreRefusedNamingTheField) {
  CommunicatorOptions o;
  EXPECT_TRUE(validate_node(o).is_ok()) << "a node of one rail";
  o.node = "box";
  o.rails = 2;
  o.rail = 2;
  Status s = validate_node(o);
  EXPECT_EQ(s.code(), LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("node_rail 2 out of range"), std::string::npos) << s.message();
  o.rail = 0;
  o.rails = 0;
  EXPECT_NE(validate_node(o).message().find("node_rails must be"), std::string::npos);
  o.rails = 2;
  o.node.clear();
  EXPECT_NE(validate_node(o).message().find("needs a node id"), std::string::npos);
  o.node = std::string(256, 'n');
  EXPECT_FALSE(validate_node(o).is_ok());
}

}  // namespace
}  // namespace longhaul::peer
