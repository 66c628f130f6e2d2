// Issue 49, secrets: a file written as the README says, `(umask 077 && openssl rand -hex 32 >
// secret)`, i.e. 64 hex digits and a newline, serves the longhaul-master daemon's --secret-file
// and, read with lh_secret_from_file, authenticates a peer of the library; the file's raw bytes
// do not. The daemon is a real process on loopback (an ephemeral port).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include <longhaul/longhaul.h>

#include "cluster.hpp"
#include "process.hpp"

namespace {

// The status of connecting a fresh communicator to `master` with `secret`.
lh_status connect_with(const std::string& master, const std::string& secret) {
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = master.c_str();
  o.listen_address = "127.0.0.1:0";
  o.secret = secret.c_str();
  o.connect_timeout_ms = 10000;
  lh_comm* c = nullptr;
  if (lh_comm_create(&o, &c) != LH_OK) return LH_ERR_INTERNAL;
  const lh_status s = lh_comm_connect(c);
  if (s == LH_OK) lh_comm_leave(c, "done");
  lh_comm_destroy(c);
  return s;
}

TEST(Mistakes, ASecretFileWrittenAsTheReadmeSaysAuthenticatesTheDaemonAndAPeer) {
  longhaul::testing::TempDir dir;
  const std::string path = dir.path() + "/secret";
  const std::string hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
  { std::ofstream(path, std::ios::binary) << hex << "\n"; }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  longhaul::testing::Cluster cluster({"--secret-file", path});
  char secret[LH_SECRET_MAX_BYTES + 1];
  size_t length = 0;
  ASSERT_EQ(lh_secret_from_file(path.c_str(), 0, secret, sizeof secret, &length), LH_OK)
      << lh_last_error();
  EXPECT_EQ(std::string(secret, length), hex);
  EXPECT_EQ(connect_with(cluster.master_address(), secret), LH_OK) << lh_last_error();
  EXPECT_EQ(connect_with(cluster.master_address(), hex + "\n"), LH_ERR_AUTH);
}

// The daemon refuses what lh_secret_from_file refuses: a file its group may read.
TEST(Mistakes, TheDaemonRefusesASecretFileTheLibraryRefuses) {
  longhaul::testing::TempDir dir;
  const std::string path = dir.path() + "/secret";
  { std::ofstream(path, std::ios::binary) << "0123456789abcdef0123456789abcdef\n"; }
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  char secret[LH_SECRET_MAX_BYTES + 1];
  size_t length = 0;
  EXPECT_EQ(lh_secret_from_file(path.c_str(), 0, secret, sizeof secret, &length),
            LH_ERR_INVALID_ARGUMENT);
  longhaul::testing::Child master(
      {LONGHAUL_MASTER_BIN, "--listen", "127.0.0.1:0", "--secret-file", path},
      dir.path() + "/master.log");
  const auto code = master.wait_exit(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_NE(master.stderr_text().find("chmod 600"), std::string::npos) << master.stderr_text();
}

}  // namespace
