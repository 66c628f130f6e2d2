// What a new user gets wrong must fail loudly (issue 49): waiting for the group (min_peers,
// lh_comm_wait_for_peers), reading the secret file, calls on unconnected, left and destroyed
// communicators, and the direct schedule's one rule at every group size. An in-process master
// and communicators on loopback, ephemeral ports, through the C API as a user calls it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <longhaul/longhaul.h>

#include "capi_handles.hpp"

namespace {

using namespace std::chrono_literals;

using longhaul::capi_test::CommPtr;
using longhaul::capi_test::CommSettings;
using longhaul::capi_test::MasterPtr;
MasterPtr start_master(const char* secret = nullptr) {
  return longhaul::capi_test::start_loopback_master(secret);
}

CommPtr make_comm(lh_master* master, const CommSettings& s = {}) {
  return longhaul::capi_test::connect_to_master(master, s);
}

int64_t group_size(lh_comm* c) {
  int64_t n = 0;
  EXPECT_EQ(lh_comm_get_attribute(c, LH_ATTR_GROUP_WORLD_SIZE, &n), LH_OK);
  return n;
}

// `n` communicators with min_peers = n, connected at once: the group forms whole.
std::vector<CommPtr> connect_group(lh_master* master, size_t n, bool full_mesh) {
  std::vector<CommPtr> comms;
  for (size_t i = 0; i < n; ++i)
    comms.push_back(make_comm(master, {.min_peers = uint32_t(n), .full_mesh = full_mesh}));
  std::vector<std::future<lh_status>> connected;
  for (auto& c : comms)
    connected.push_back(std::async(std::launch::async, [&c] { return lh_comm_connect(c.get()); }));
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(connected[i].get(), LH_OK) << lh_comm_last_error(comms[i].get());
  return comms;
}

// Every communicator all-reduces one float holding its index + 1 with `schedule`.
std::vector<lh_status> allreduce_all(std::vector<CommPtr>& comms, lh_schedule schedule,
                                     std::vector<float>* sums) {
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  o.schedule = schedule;
  sums->assign(comms.size(), 0.0f);
  std::vector<std::future<lh_status>> done;
  for (size_t i = 0; i < comms.size(); ++i)
    done.push_back(std::async(std::launch::async, [&, i] {
      (*sums)[i] = float(i + 1);
      return lh_allreduce(comms[i].get(), &(*sums)[i], &(*sums)[i], 1, LH_DTYPE_F32, LH_OP_SUM, &o,
                          nullptr);
    }));
  std::vector<lh_status> statuses;
  for (auto& d : done) statuses.push_back(d.get());
  return statuses;
}

// ------------------------------------------------------------------ waiting for the group

TEST(Mistakes, ConnectWithMinPeersReturnsOnlyOnceTheGroupHasThem) {
  MasterPtr master = start_master();
  CommPtr a = make_comm(master.get(), {.min_peers = 2});
  CommPtr b = make_comm(master.get(), {.min_peers = 2});
  auto a_connected = std::async(std::launch::async, [&] { return lh_comm_connect(a.get()); });
  EXPECT_EQ(a_connected.wait_for(300ms), std::future_status::timeout)
      << "the first peer returned from connect alone";
  ASSERT_EQ(lh_comm_connect(b.get()), LH_OK) << lh_comm_last_error(b.get());
  ASSERT_EQ(a_connected.get(), LH_OK) << lh_comm_last_error(a.get());
  EXPECT_EQ(group_size(a.get()), 2);
  EXPECT_EQ(group_size(b.get()), 2);
}

TEST(Mistakes, ConnectWithMinPeersTimesOutNamingHowManyCameAndStaysUsable) {
  MasterPtr master = start_master();
  CommPtr a = make_comm(master.get(), {.min_peers = 3, .connect_timeout_ms = 400});
  EXPECT_EQ(lh_comm_connect(a.get()), LH_ERR_TIMEOUT);
  EXPECT_NE(std::string(lh_comm_last_error(a.get())).find("1 of the 3 members min_peers"),
            std::string::npos)
      << lh_comm_last_error(a.get());
  float x = 5.0f;  // admitted: a group of one still works
  EXPECT_EQ(lh_allreduce(a.get(), &x, &x, 1, LH_DTYPE_F32, LH_OP_SUM, nullptr, nullptr), LH_OK);
  EXPECT_EQ(x, 5.0f);
}

TEST(Mistakes, WaitForPeersAdmitsAJoinerAndTimesOutWhenNoneComes) {
  MasterPtr master = start_master();
  CommPtr a = make_comm(master.get());
  CommPtr b = make_comm(master.get());
  ASSERT_EQ(lh_comm_connect(a.get()), LH_OK);
  EXPECT_EQ(lh_comm_wait_for_peers(a.get(), 1, 0), LH_OK);
  EXPECT_EQ(lh_comm_wait_for_peers(a.get(), 2, 0), LH_ERR_TIMEOUT);
  auto waited =
      std::async(std::launch::async, [&] { return lh_comm_wait_for_peers(a.get(), 2, 20000); });
  ASSERT_EQ(lh_comm_connect(b.get()), LH_OK) << lh_comm_last_error(b.get());
  ASSERT_EQ(waited.get(), LH_OK) << lh_comm_last_error(a.get());
  EXPECT_EQ(group_size(a.get()), 2);
}

// The documented rule: only the start waits; a group that shrinks below min_peers works on.
TEST(Mistakes, AGroupThatShrinksBelowMinPeersKeepsWorkingWithFewer) {
  MasterPtr master = start_master();
  std::vector<CommPtr> comms = connect_group(master.get(), 2, false);
  ASSERT_EQ(lh_comm_leave(comms[1].get(), "done"), LH_OK);
  for (int i = 0; i < 400 && group_size(comms[0].get()) != 1; ++i) {
    int pending = 0;
    lh_comm_are_peers_pending(comms[0].get(), &pending);
    if (pending) {
      ASSERT_EQ(lh_comm_update_topology(comms[0].get()), LH_OK);
    }
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(group_size(comms[0].get()), 1);
  float x = 3.0f;
  EXPECT_EQ(lh_allreduce(comms[0].get(), &x, &x, 1, LH_DTYPE_F32, LH_OP_SUM, nullptr, nullptr),
            LH_OK);
  EXPECT_EQ(x, 3.0f);
  EXPECT_EQ(lh_comm_wait_for_peers(comms[0].get(), 2, 200), LH_ERR_TIMEOUT);
}

// ------------------------------------------------------------------------------- secrets

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "/mistakes_" + name + "_" + std::to_string(::getpid());
}

void write_file(const std::string& path, const std::string& bytes, mode_t mode) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

std::string read_secret(const std::string& path, int allow_weak, lh_status* status) {
  char buffer[LH_SECRET_MAX_BYTES + 1];
  size_t length = 0;
  *status = lh_secret_from_file(path.c_str(), allow_weak, buffer, sizeof buffer, &length);
  return *status == LH_OK ? std::string(buffer, length) : std::string();
}

// README: `(umask 077 && openssl rand -hex 32 > secret)`, i.e. 64 hex digits and a newline.
TEST(Mistakes, ASecretFileWrittenAsTheReadmeSaysAuthenticatesMasterAndPeer) {
  const std::string path = temp_path("secret");
  const std::string hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  write_file(path, hex + "\n", 0600);
  lh_status s;
  const std::string secret = read_secret(path, 0, &s);
  ASSERT_EQ(s, LH_OK) << lh_last_error();
  EXPECT_EQ(secret, hex);
  MasterPtr master = start_master(secret.c_str());
  CommPtr peer = make_comm(master.get(), {.secret = secret.c_str()});
  EXPECT_EQ(lh_comm_connect(peer.get()), LH_OK) << lh_comm_last_error(peer.get());
  // The file's raw bytes (newline and all) are another secret: refused.
  const std::string raw = hex + "\n";
  CommPtr stranger = make_comm(master.get(), {.secret = raw.c_str()});
  EXPECT_EQ(lh_comm_connect(stranger.get()), LH_ERR_AUTH);
  std::remove(path.c_str());
}

TEST(Mistakes, TheSecretFileRulesAreOneLineEndingMode600AndSixteenBytes) {
  const std::string path = temp_path("rules");
  lh_status s;
  write_file(path, "0123456789abcdef\r\n", 0600);
  EXPECT_EQ(read_secret(path, 0, &s), "0123456789abcdef");
  write_file(path, "0123456789abcdef\n\n", 0600);  // only one line ending goes
  EXPECT_EQ(read_secret(path, 0, &s), "0123456789abcdef\n");
  write_file(path, " 0123456789abcdef \n", 0600);  // spaces stay
  EXPECT_EQ(read_secret(path, 0, &s), " 0123456789abcdef ");
  write_file(path, "0123456789abcdef\n", 0644);
  read_secret(path, 0, &s);
  EXPECT_EQ(s, LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lh_last_error()).find("chmod 600"), std::string::npos) << lh_last_error();
  EXPECT_EQ(read_secret(path, 1, &s), "0123456789abcdef");  // allow_weak
  write_file(path, "short\n", 0600);
  read_secret(path, 0, &s);
  EXPECT_EQ(s, LH_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lh_last_error()).find("fewer than 16"), std::string::npos);
  write_file(path, "\n", 0600);
  read_secret(path, 1, &s);
  EXPECT_EQ(s, LH_ERR_INVALID_ARGUMENT);  // empty even when weak is allowed
  write_file(path, "0123456789abcdef", 0600);
  char small[8];
  size_t length = 0;
  EXPECT_EQ(lh_secret_from_file(path.c_str(), 0, small, sizeof small, &length),
            LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(length, 16u);  // how much room it needs, less the NUL
  std::remove(path.c_str());
  read_secret(path, 0, &s);
  EXPECT_EQ(s, LH_ERR_IO);
}

// ----------------------------------------------- unconnected, left and destroyed handles

// Every call that communicates, on `c`, each expected to return `want`.
void expect_every_call_returns(lh_comm* c, lh_status want) {
  float x[4] = {1, 2, 3, 4}, all[8] = {};
  lh_op* op = nullptr;
  EXPECT_EQ(lh_allreduce(c, x, x, 4, LH_DTYPE_F32, LH_OP_SUM, nullptr, nullptr), want);
  EXPECT_EQ(lh_allreduce_async(c, x, x, 4, LH_DTYPE_F32, LH_OP_SUM, nullptr, &op), want);
  EXPECT_EQ(op, nullptr);
  EXPECT_EQ(lh_reduce_scatter(c, x, all, 4, nullptr, LH_DTYPE_F32, LH_OP_SUM, nullptr, nullptr),
            want);
  EXPECT_EQ(lh_allgather(c, x, 4, all, nullptr, LH_DTYPE_F32, nullptr, nullptr), want);
  EXPECT_EQ(lh_broadcast(c, x, 4, LH_DTYPE_F32, 0, nullptr, nullptr), want);
  EXPECT_EQ(lh_barrier(c, nullptr, nullptr), want);
  const void* sends[] = {x};
  void* recvs[] = {x};
  const size_t counts[] = {4};
  EXPECT_EQ(lh_allreduce_batch(c, sends, recvs, counts, 1, LH_DTYPE_F32, LH_OP_SUM, nullptr, 1),
            want);
  EXPECT_EQ(lh_comm_update_topology(c), want);
  EXPECT_EQ(lh_comm_wait_for_peers(c, 2, 0), want);
  lh_state* state = nullptr;
  ASSERT_EQ(lh_state_create(&state), LH_OK);
  ASSERT_EQ(lh_state_add_tensor(state, "x", x, 4, LH_DTYPE_F32), LH_OK);
  EXPECT_EQ(lh_sync_state(c, state, LH_SYNC_ENFORCE_POPULAR, nullptr), want);
  lh_state_destroy(state);
  lh_param_range range{x, 4, LH_DTYPE_F32};
  lh_sync_engine_options eo;
  lh_sync_engine_options_init(&eo);
  eo.ranges = &range;
  eo.range_count = 1;
  lh_sync_engine* engine = nullptr;
  EXPECT_EQ(lh_sync_engine_start(c, &eo, &engine), want);
  EXPECT_EQ(engine, nullptr);
  EXPECT_EQ(x[0], 1.0f);  // nothing was written
  EXPECT_EQ(all[0], 0.0f);
}

TEST(Mistakes, AnUnconnectedCommunicatorRefusesEveryCallWithClosed) {
  MasterPtr master = start_master();
  CommPtr c = make_comm(master.get());
  expect_every_call_returns(c.get(), LH_ERR_CLOSED);
  EXPECT_NE(std::string(lh_comm_last_error(c.get())).find("not connected"), std::string::npos);
  EXPECT_EQ(group_size(c.get()), 0);  // the queries still answer
}

TEST(Mistakes, ALeftCommunicatorRefusesEveryCallWithClosed) {
  MasterPtr master = start_master();
  CommPtr c = make_comm(master.get());
  ASSERT_EQ(lh_comm_connect(c.get()), LH_OK);
  ASSERT_EQ(lh_comm_leave(c.get(), "done"), LH_OK);
  expect_every_call_returns(c.get(), LH_ERR_CLOSED);
  EXPECT_NE(std::string(lh_comm_last_error(c.get())).find("left"), std::string::npos);
  EXPECT_EQ(lh_comm_connect(c.get()), LH_ERR_CLOSED);
  EXPECT_EQ(lh_comm_leave(c.get(), "again"), LH_OK);
}

TEST(Mistakes, ACallAfterDestroyIsReportedAsClosedNotUndefined) {
  MasterPtr master = start_master();
  lh_comm* c = make_comm(master.get()).release();
  ASSERT_EQ(lh_comm_connect(c), LH_OK);
  lh_comm_destroy(c);
  expect_every_call_returns(c, LH_ERR_CLOSED);
  EXPECT_NE(std::string(lh_last_error()).find("was destroyed"), std::string::npos)
      << lh_last_error();
  int64_t v = 0;
  EXPECT_EQ(lh_comm_get_attribute(c, LH_ATTR_RANK, &v), LH_ERR_CLOSED);
  EXPECT_EQ(lh_comm_connect(c), LH_ERR_CLOSED);
  EXPECT_EQ(lh_comm_leave(c, nullptr), LH_ERR_CLOSED);
  EXPECT_NE(std::string(lh_comm_last_error(c)).find("destroyed"), std::string::npos);
  lh_comm_destroy(c);  // twice: ignored
}

// ------------------------------------------------------- the direct schedule at every size

TEST(Mistakes, TheDirectScheduleWithoutFullMeshIsRefusedAtTwoPeersAsAtFour) {
  for (size_t n : {2u, 4u}) {
    MasterPtr master = start_master();
    std::vector<CommPtr> comms = connect_group(master.get(), n, /*full_mesh=*/false);
    std::vector<float> sums;
    for (lh_status s : allreduce_all(comms, LH_SCHEDULE_DIRECT, &sums))
      EXPECT_EQ(s, LH_ERR_UNSUPPORTED) << "N = " << n;
    EXPECT_NE(std::string(lh_comm_last_error(comms[0].get())).find("full_mesh"), std::string::npos);
    for (lh_status s : allreduce_all(comms, LH_SCHEDULE_RING, &sums)) EXPECT_EQ(s, LH_OK);
    EXPECT_EQ(sums[0], float(n * (n + 1) / 2));
  }
}

TEST(Mistakes, TheDirectScheduleWithFullMeshRunsAtTwoPeersAsAtFour) {
  for (size_t n : {2u, 4u}) {
    MasterPtr master = start_master();
    std::vector<CommPtr> comms = connect_group(master.get(), n, /*full_mesh=*/true);
    std::vector<float> sums;
    for (lh_status s : allreduce_all(comms, LH_SCHEDULE_DIRECT, &sums))
      EXPECT_EQ(s, LH_OK) << "N = " << n;
    for (float sum : sums) EXPECT_EQ(sum, float(n * (n + 1) / 2));
  }
}

// ------------------------------------------------------------------ a collective's timeout

// Starts an in-place all-reduce of the floats in `values` on `comm` (timeout_ms 0: none); what
// lh_allreduce_async returned, the operation in *op.
lh_status try_start_allreduce(lh_comm* comm, std::vector<float>& values, uint32_t timeout_ms,
                              lh_op** op) {
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  o.timeout_ms = timeout_ms;
  return lh_allreduce_async(comm, values.data(), values.data(), values.size(), LH_DTYPE_F32,
                            LH_OP_SUM, &o, op);
}

// try_start_allreduce, which must start.
lh_op* start_allreduce(lh_comm* comm, std::vector<float>& values, uint32_t timeout_ms) {
  lh_op* op = nullptr;
  EXPECT_EQ(try_start_allreduce(comm, values, timeout_ms, &op), LH_OK) << lh_comm_last_error(comm);
  return op;
}

// Waits for `op` and destroys it.
struct Finished {
  lh_status status;
  std::chrono::duration<double> took;  // the wait
  std::string why;
};
Finished finish(lh_op* op) {
  const auto t0 = std::chrono::steady_clock::now();
  const lh_status s = lh_op_wait(op);
  Finished f{s, std::chrono::steady_clock::now() - t0, s == LH_OK ? "" : lh_op_last_error(op)};
  lh_op_destroy(op);
  return f;
}

// A member's call of an operation the group gave up on: refused at the start once the master's
// abort of the epoch reached it, or failed at the wait when only the other members' cancels had.
Finished start_late_and_finish(lh_comm* comm, std::vector<float>& values) {
  lh_op* op = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const lh_status s = try_start_allreduce(comm, values, 0, &op);
  if (s != LH_OK) return {s, std::chrono::steady_clock::now() - t0, lh_comm_last_error(comm)};
  return finish(op);
}

// After a failed collective every member goes on as the docs' training loop does: it calls
// lh_comm_update_topology and runs the all-reduce, again while the all-reduce fails with a
// retryable status. The group's next all-reduce is exact, `sum` on every member. (A member whose
// update_topology reached the master before the master heard of the failure is answered "nothing
// to do" and returns; its next collective then fails once the group's abort reaches it, and it
// re-forms with the others on its second pass. Waiting for every member's first update_topology
// before any all-reduce, as this helper once did, left the others waiting for it for ever.)
void expect_reformed_and_summing(std::vector<CommPtr>& comms, float sum) {
  std::vector<std::future<std::pair<lh_status, float>>> done;
  for (size_t i = 0; i < comms.size(); ++i)
    done.push_back(std::async(std::launch::async, [&, i] {
      float x = 0.0f;
      lh_status s = LH_ERR_ABORTED;
      for (int pass = 0; pass < 5 && (s == LH_ERR_ABORTED || s == LH_ERR_PEER_LOST); ++pass) {
        if ((s = lh_comm_update_topology(comms[i].get())) != LH_OK) break;
        x = float(i + 1);
        s = lh_allreduce(comms[i].get(), &x, &x, 1, LH_DTYPE_F32, LH_OP_SUM, nullptr, nullptr);
      }
      return std::pair{s, x};
    }));
  for (size_t i = 0; i < done.size(); ++i) {
    const auto [s, got] = done[i].get();
    EXPECT_EQ(s, LH_OK) << lh_comm_last_error(comms[i].get());
    EXPECT_EQ(got, sum) << "member " << i;
  }
}

// A member that never calls held the others for ever. With a timeout the member whose timeout
// passes fails with LH_ERR_TIMEOUT; failing it cancels its transfers at both ends and asks the
// master to abort the group's collectives of the epoch, so a member already in the operation is
// released (LH_ERR_ABORTED); the member that calls late fails at once with LH_ERR_ABORTED; after
// lh_comm_update_topology the group's next all-reduce is exact (docs/api.md, "Mistakes longhaul
// catches").
TEST(Mistakes, ACollectiveWhoseTimeoutPassesFailsForTheWholeGroupAndTheNextOneWorks) {
  MasterPtr master = start_master();
  std::vector<CommPtr> comms = connect_group(master.get(), 3, /*full_mesh=*/false);
  std::vector<float> v0(8, 1.0f), v1(8, 2.0f), v2(8, 3.0f);
  lh_op* timed = start_allreduce(comms[0].get(), v0, 300);
  lh_op* waiting = start_allreduce(comms[1].get(), v1, 2000);
  const Finished t = finish(timed);
  EXPECT_EQ(t.status, LH_ERR_TIMEOUT) << t.why;
  EXPECT_NE(t.why.find("timeout of 300 ms"), std::string::npos) << t.why;
  EXPECT_GE(t.took.count(), 0.25);
  EXPECT_LT(t.took.count(), 10.0);
  const Finished w = finish(waiting);
  EXPECT_TRUE(w.status == LH_ERR_ABORTED || w.status == LH_ERR_TIMEOUT) << w.why;
  EXPECT_LT(w.took.count(), 10.0) << "the member already in it was released";
  const Finished l = start_late_and_finish(comms[2].get(), v2);
  EXPECT_EQ(l.status, LH_ERR_ABORTED) << l.why;
  EXPECT_LT(l.took.count(), 10.0) << "the late member does not wait for the others";
  EXPECT_EQ(v0, std::vector<float>(8, 1.0f)) << "a failed in-place operation gives its input back";
  expect_reformed_and_summing(comms, 6.0f);
}

// The member already in the operation has no timeout of its own and waits for the part of the
// member that never came, which no cancel of the first member's transfers reaches: without the
// group-wide abort it hung here (in the second of 10 repeats). The master's abort, which the first
// member's timeout asks for, releases it.
TEST(Mistakes, TheFirstTimeoutReleasesAMemberThatHasNone) {
  MasterPtr master = start_master();
  std::vector<CommPtr> comms = connect_group(master.get(), 3, /*full_mesh=*/false);
  std::vector<float> v0(8, 1.0f), v1(8, 2.0f), v2(8, 3.0f);
  lh_op* timed = start_allreduce(comms[0].get(), v0, 300);
  lh_op* waiting = start_allreduce(comms[1].get(), v1, 0);
  EXPECT_EQ(finish(timed).status, LH_ERR_TIMEOUT);
  const Finished w = finish(waiting);
  EXPECT_EQ(w.status, LH_ERR_ABORTED) << w.why;
  EXPECT_LT(w.took.count(), 10.0) << "released by the group's abort";
  const Finished l = start_late_and_finish(comms[2].get(), v2);
  EXPECT_EQ(l.status, LH_ERR_ABORTED) << l.why;
  EXPECT_EQ(v1, std::vector<float>(8, 2.0f)) << "a failed in-place operation gives its input back";
  expect_reformed_and_summing(comms, 6.0f);
}

// lh_op_cancel: the member that gives up on its own operation fails it for the group at once.
TEST(Mistakes, CancellingAnOperationFailsItForTheGroupAndTheNextOneWorks) {
  MasterPtr master = start_master();
  std::vector<CommPtr> comms = connect_group(master.get(), 2, /*full_mesh=*/false);
  std::vector<float> v0(8, 1.0f), v1(8, 2.0f);
  lh_op* op = start_allreduce(comms[0].get(), v0, 0);
  EXPECT_EQ(lh_op_cancel(op), LH_OK);
  const Finished cancelled = finish(op);
  EXPECT_EQ(cancelled.status, LH_ERR_ABORTED) << cancelled.why;
  EXPECT_NE(cancelled.why.find("cancelled by the caller"), std::string::npos) << cancelled.why;
  EXPECT_EQ(v0, std::vector<float>(8, 1.0f));
  EXPECT_EQ(lh_op_cancel(nullptr), LH_ERR_INVALID_ARGUMENT);
  const Finished other = finish(start_allreduce(comms[1].get(), v1, 0));
  EXPECT_NE(other.status, LH_OK) << "the other member's part of a cancelled operation fails";
  EXPECT_LT(other.took.count(), 10.0);
  expect_reformed_and_summing(comms, 3.0f);
}

// ------------------------------------------------------------------ calls that disagree

// Member i calls lh_allreduce in place on `values[i]` with reduce op `ops[i]` and dtype f32;
// each member's status and last error.
std::vector<Finished> allreduce_with(std::vector<CommPtr>& comms,
                                     std::vector<std::vector<float>>& values,
                                     const std::vector<lh_reduce_op>& ops) {
  std::vector<std::future<Finished>> done;
  for (size_t i = 0; i < comms.size(); ++i)
    done.push_back(std::async(std::launch::async, [&, i] {
      const auto t0 = std::chrono::steady_clock::now();
      const lh_status s = lh_allreduce(comms[i].get(), values[i].data(), values[i].data(),
                                       values[i].size(), LH_DTYPE_F32, ops[i], nullptr, nullptr);
      return Finished{s, std::chrono::steady_clock::now() - t0,
                      s == LH_OK ? "" : lh_comm_last_error(comms[i].get())};
    }));
  std::vector<Finished> out;
  for (auto& d : done) out.push_back(d.get());
  return out;
}

// `sum` on one peer and `max` on another returned LH_OK with mixed results. Now every member fails
// with LH_ERR_MISMATCH naming the field and both members, its buffer as it was; after re-forming,
// the next agreeing call is exact.
TEST(Mistakes, MembersThatCallWithDifferentReduceOpsFailWithMismatchNamingFieldAndMembers) {
  MasterPtr master = start_master();
  std::vector<CommPtr> comms = connect_group(master.get(), 3, /*full_mesh=*/false);
  std::vector<std::vector<float>> values = {std::vector<float>(1000, 1.0f),
                                            std::vector<float>(1000, 2.0f),
                                            std::vector<float>(1000, 3.0f)};
  const auto outcomes = allreduce_with(comms, values, {LH_OP_SUM, LH_OP_SUM, LH_OP_MAX});
  for (size_t i = 0; i < comms.size(); ++i) {
    EXPECT_EQ(outcomes[i].status, LH_ERR_MISMATCH) << i << ": " << outcomes[i].why;
    for (const char* words : {"the reduce op", "max at peer", "sum at peer"})
      EXPECT_NE(outcomes[i].why.find(words), std::string::npos) << outcomes[i].why;
    EXPECT_LT(outcomes[i].took.count(), 10.0);
    EXPECT_EQ(values[i], std::vector<float>(1000, float(i + 1))) << "member " << i;
  }
  expect_reformed_and_summing(comms, 6.0f);
}

// Counts of 1M against 2M returned LH_OK on one peer and hung the other for ever.
TEST(Mistakes, DifferentCountsFailBothMembersInsteadOfHangingOne) {
  MasterPtr master = start_master();
  std::vector<CommPtr> comms = connect_group(master.get(), 2, /*full_mesh=*/false);
  std::vector<std::vector<float>> values = {std::vector<float>(1 << 20, 1.0f),
                                            std::vector<float>(2 << 20, 1.0f)};
  const auto outcomes = allreduce_with(comms, values, {LH_OP_SUM, LH_OP_SUM});
  for (const Finished& f : outcomes) {
    EXPECT_EQ(f.status, LH_ERR_MISMATCH) << f.why;
    for (const char* words :
         {"the count: ", "1048576 elements at peer", "2097152 elements at peer"})
      EXPECT_NE(f.why.find(words), std::string::npos) << f.why;
    EXPECT_LT(f.took.count(), 10.0);
  }
  expect_reformed_and_summing(comms, 3.0f);
}

// A broadcast from different roots, and a barrier on one member against an all-reduce on the
// other: each is named.
TEST(Mistakes, ABroadcastFromDifferentRootsAndABarrierAgainstAnAllReduceAreMismatches) {
  MasterPtr master = start_master();
  std::vector<CommPtr> comms = connect_group(master.get(), 2, /*full_mesh=*/false);
  std::vector<float> b0(16, 1.0f), b1(16, 2.0f);
  auto root0 = std::async(std::launch::async, [&] {
    return lh_broadcast(comms[0].get(), b0.data(), b0.size(), LH_DTYPE_F32, 0, nullptr, nullptr);
  });
  const lh_status from1 =
      lh_broadcast(comms[1].get(), b1.data(), b1.size(), LH_DTYPE_F32, 1, nullptr, nullptr);
  EXPECT_EQ(root0.get(), LH_ERR_MISMATCH) << lh_comm_last_error(comms[0].get());
  EXPECT_EQ(from1, LH_ERR_MISMATCH);
  EXPECT_NE(std::string(lh_comm_last_error(comms[1].get())).find("the root"), std::string::npos)
      << lh_comm_last_error(comms[1].get());
  EXPECT_EQ(b0, std::vector<float>(16, 1.0f));
  EXPECT_EQ(b1, std::vector<float>(16, 2.0f));
  float x = 1.0f;
  auto reduce = std::async(std::launch::async, [&] {
    return lh_allreduce(comms[0].get(), &x, &x, 1, LH_DTYPE_F32, LH_OP_SUM, nullptr, nullptr);
  });
  const lh_status barrier = lh_barrier(comms[1].get(), nullptr, nullptr);
  EXPECT_EQ(reduce.get(), LH_ERR_MISMATCH) << lh_comm_last_error(comms[0].get());
  EXPECT_EQ(barrier, LH_ERR_MISMATCH);
  EXPECT_NE(std::string(lh_comm_last_error(comms[1].get())).find("the call: "), std::string::npos)
      << lh_comm_last_error(comms[1].get());
  expect_reformed_and_summing(comms, 3.0f);
}

}  // namespace

// ------------------------------------------------------------------ congestion control

// A name the kernel could never hold (TCP_CA_NAME_MAX) is refused at create, not at the first
// connection; a name it does not know fails that connection with the kernel's error
// (tests/unit/net/socket_tuning_test.cpp).
TEST(Mistakes, ACongestionControlNameTooLongIsRefusedAtCreate) {
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = "127.0.0.1:1";
  o.tcp_congestion = "a-name-of-twenty-bytes";
  lh_comm* c = nullptr;
  EXPECT_EQ(lh_comm_create(&o, &c), LH_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr);
  EXPECT_NE(std::string(lh_last_error()).find("tcp_congestion must be at most 15 bytes"),
            std::string::npos)
      << lh_last_error();
}
