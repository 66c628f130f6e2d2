// The shared-memory local group (node/shm_local_group.hpp) with real processes: L = 1..4 forked
// ranks reduce-scatter and all-gather buffers of every shape, checked byte for byte against the
// reduction kernels applied in rank order; a sibling killed, aborted or absent ends the group on
// the others promptly; stale segments, shape disagreements and bad options get clear errors.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "node/shm_local_group.hpp"
#include "quant/reduce.hpp"

namespace longhaul::node {
namespace {

using namespace std::chrono_literals;
using quant::DType;
using quant::ReduceOp;

std::string unique_name() {
  static int n = 0;
  return "/lh-test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

// Forked ranks: each runs `body(rank)` and exits with its return value (0: passed; the body
// prints why otherwise). The destructor SIGKILLs and reaps whatever still runs.
class Ranks {
 public:
  ~Ranks() {
    for (pid_t p : pids_) {
      if (p <= 0) continue;  // reaped already (and kill(-1) would signal everything)
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
  }
  pid_t start(uint32_t rank, const std::function<int(uint32_t)>& body) {
    const pid_t p = fork();
    if (p == 0) {
      const int code = body(rank);
      std::fflush(nullptr);
      _exit(code);
    }
    pids_.push_back(p);
    return p;
  }
  // The exit code of the i-th started rank (128 + signal if killed).
  int wait(size_t i) {
    int status = 0;
    waitpid(pids_[i], &status, 0);
    pids_[i] = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::vector<pid_t>& pids() { return pids_; }

 private:
  std::vector<pid_t> pids_;
};

ShmLocalGroupOptions options(const std::string& name, uint32_t rank, uint32_t size,
                             size_t slot_bytes = 4096, std::chrono::milliseconds timeout = 20s) {
  ShmLocalGroupOptions o;
  o.name = name;
  o.rank = rank;
  o.size = size;
  o.slot_bytes = slot_bytes;
  o.timeout = timeout;
  return o;
}

// Rank r's input: deterministic bytes that are valid values of every type (small integers for
// the integer types, so products stay defined; floats from them).
std::vector<std::byte> input_of(uint32_t rank, size_t count, DType dtype) {
  std::vector<float> f(count);
  for (size_t i = 0; i < count; ++i)
    f[i] = static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 29) - 14) * 0.37f;
  std::vector<std::byte> out(count * quant::element_size(dtype));
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DType::kF32:
        std::memcpy(&out[i * 4], &f[i], 4);
        break;
      case DType::kF64: {
        const double d = f[i];
        std::memcpy(&out[i * 8], &d, 8);
        break;
      }
      case DType::kBF16: {
        uint32_t b;
        std::memcpy(&b, &f[i], 4);
        const auto h = static_cast<uint16_t>(b >> 16);
        std::memcpy(&out[i * 2], &h, 2);
        break;
      }
      case DType::kI32: {
        const int32_t v = static_cast<int32_t>((i * 7 + rank * 13) % 29) - 14;
        std::memcpy(&out[i * 4], &v, 4);
        break;
      }
      default:
        break;
    }
  }
  return out;
}

// The reduction of every rank's input, in rank order, as the group defines it.
std::vector<std::byte> expected(uint32_t ranks, size_t count, DType dtype, ReduceOp op) {
  auto acc = input_of(0, count, dtype);
  if (ranks == 1 || count == 0) return acc;
  const bool half = dtype == DType::kBF16 || dtype == DType::kF16;
  std::vector<std::vector<std::byte>> others;
  for (uint32_t r = 1; r < ranks; ++r) others.push_back(input_of(r, count, dtype));
  if (half && (op == ReduceOp::kSum || op == ReduceOp::kAvg)) {
    std::vector<const void*> sources;
    for (auto& o : others) sources.push_back(o.data());
    EXPECT_TRUE(quant::sum_widened(acc.data(), sources, count, dtype, 1).is_ok());
    return acc;
  }
  for (auto& o : others)
    EXPECT_TRUE(quant::reduce_into(acc.data(), o.data(), count, dtype,
                                   op == ReduceOp::kAvg ? ReduceOp::kSum : op)
                    .is_ok());
  return acc;
}

int fail(const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  return 1;
}

// One rank: forms the group, reduce-scatters and all-gathers, checks both against expected().
int reduce_and_gather(const ShmLocalGroupOptions& o, size_t count, DType dtype, ReduceOp op) {
  auto group = ShmLocalGroup::create(o);
  if (!group) return fail(group.status().to_string());
  const size_t es = quant::element_size(dtype);
  const auto in = input_of(o.rank, count, dtype);
  const auto want = expected(o.size, count, dtype, op);
  const size_t base = count / o.size, extra = count % o.size;
  const size_t begin = o.rank * base + std::min<size_t>(o.rank, extra);
  const size_t mine = base + (o.rank < extra ? 1 : 0);
  std::vector<std::byte> shard(mine * es + 1);
  if (Status s = (*group)->reduce_scatter(in.data(), shard.data(), count, dtype, op); !s)
    return fail(s.to_string());
  if (mine && std::memcmp(shard.data(), want.data() + begin * es, mine * es) != 0)
    return fail("rank " + std::to_string(o.rank) + ": shard differs");
  std::vector<std::byte> out(count * es);
  if (Status s = (*group)->all_gather(shard.data(), out.data(), count, dtype); !s)
    return fail(s.to_string());
  if (out != want) return fail("rank " + std::to_string(o.rank) + ": gathered output differs");
  // In place: the shard at its own place in the output.
  std::vector<std::byte> in_place(count * es);
  if (mine) std::memcpy(in_place.data() + begin * es, shard.data(), mine * es);
  if (Status s = (*group)->all_gather(in_place.data() + begin * es, in_place.data(), count, dtype);
      !s)
    return fail(s.to_string());
  return in_place == want ? 0 : fail("in-place gather differs");
}

TEST(ShmLocalGroup, ReducesAndGathersLikeTheKernelsInRankOrderForOneToFourRanks) {
  struct Case {
    size_t count;
    DType dtype;
    ReduceOp op;
  };
  // Counts below the rank count, odd counts, and ones that take many rounds of 4 KiB slots.
  const std::vector<Case> cases = {
      {1, DType::kF32, ReduceOp::kSum},     {3, DType::kI32, ReduceOp::kMax},
      {5003, DType::kF32, ReduceOp::kSum},  {4099, DType::kBF16, ReduceOp::kSum},
      {777, DType::kF64, ReduceOp::kMin},   {10007, DType::kI32, ReduceOp::kProd},
      {2048, DType::kBF16, ReduceOp::kMax}, {12345, DType::kF32, ReduceOp::kAvg}};
  for (uint32_t ranks = 1; ranks <= 4; ++ranks)
    for (const Case& c : cases) {
      const std::string name = unique_name();
      Ranks procs;
      for (uint32_t r = 0; r < ranks; ++r)
        procs.start(r, [&](uint32_t rank) {
          return reduce_and_gather(options(name, rank, ranks), c.count, c.dtype, c.op);
        });
      for (uint32_t r = 0; r < ranks; ++r)
        EXPECT_EQ(procs.wait(r), 0)
            << ranks << " ranks, count " << c.count << ", dtype " << static_cast<int>(c.dtype)
            << ", op " << static_cast<int>(c.op);
    }
}

TEST(ShmLocalGroup, EveryRankAgreesOnTheLowestFailureAndTheNameIsGoneOnceFormed) {
  const std::string name = unique_name();
  Ranks procs;
  for (uint32_t r = 0; r < 3; ++r)
    procs.start(r, [&](uint32_t rank) {
      auto group = ShmLocalGroup::create(options(name, rank, 3));
      if (!group) return fail(group.status().to_string());
      // Rank 0 unlinks the name once everyone has joined, before its create() returns.
      if (rank == 0 && shm_open(name.c_str(), O_RDONLY, 0) >= 0)
        return fail("the segment's name outlived the forming");
      if (Status s = (*group)->agree(Status::ok()); !s) return fail(s.to_string());
      const Status mine = rank == 0 ? Status::ok() : peer_lost("rail " + std::to_string(rank));
      const Status all = (*group)->agree(mine);
      if (all.code() != LH_ERR_PEER_LOST || all.message() != "local rank 1: rail 1")
        return fail("agree gave " + all.to_string());
      // A failed outcome is the caller's to retry: the group lives on.
      const Status again = (*group)->agree(Status::ok());
      return again.is_ok() ? 0 : fail("after a failed outcome: " + again.to_string());
    });
  for (size_t r = 0; r < 3; ++r) EXPECT_EQ(procs.wait(r), 0);
}

TEST(ShmLocalGroup, ASiblingKilledMidStepEndsTheGroupOnTheOthersPromptly) {
  const std::string name = unique_name();
  Ranks procs;
  for (uint32_t r = 0; r < 3; ++r)
    procs.start(r, [&](uint32_t rank) {
      auto group = ShmLocalGroup::create(options(name, rank, 3));
      if (!group) return fail(group.status().to_string());
      if (rank == 2) {
        pause();  // killed by the test while its siblings wait for it
        return 1;
      }
      std::vector<float> in(100), shard(100);
      const auto started = std::chrono::steady_clock::now();
      Status s =
          (*group)->reduce_scatter(in.data(), shard.data(), in.size(), DType::kF32, ReduceOp::kSum);
      const auto took = std::chrono::steady_clock::now() - started;
      if (s.code() != LH_ERR_NODE_EVICTED || s.message().find("local rank 2") == std::string::npos)
        return fail("rank " + std::to_string(rank) + " got " + s.to_string());
      if (took > 5s) return fail("took too long");
      return (*group)->failure().is_ok() ? fail("the group lives on") : 0;
    });
  std::this_thread::sleep_for(500ms);
  const auto killed = std::chrono::steady_clock::now();
  kill(procs.pids()[2], SIGKILL);  // not reaped until the end: the siblings see it by pidfd
  EXPECT_EQ(procs.wait(0), 0);
  EXPECT_EQ(procs.wait(1), 0);
  // 250 ms between looks, plus the scheduling of two exits on a loaded 2-core machine.
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 3s);
}

TEST(ShmLocalGroup, AnAbortWakesAWaitingSiblingAndEveryLaterCallFails) {
  const std::string name = unique_name();
  Ranks procs;
  for (uint32_t r = 0; r < 2; ++r)
    procs.start(r, [&](uint32_t rank) {
      auto group = ShmLocalGroup::create(options(name, rank, 2));
      if (!group) return fail(group.status().to_string());
      if (rank == 1) {
        std::this_thread::sleep_for(200ms);
        (*group)->abort(aborted_error("the trainer's watchdog"));
        std::this_thread::sleep_for(500ms);  // stays alive: the abort, not a death, ends rank 0
        return 0;
      }
      std::vector<float> shard(8), out(16);
      const auto started = std::chrono::steady_clock::now();
      Status s = (*group)->all_gather(shard.data(), out.data(), out.size(), DType::kF32);
      if (s.code() != LH_ERR_ABORTED || s.message() != "the trainer's watchdog")
        return fail("got " + s.to_string());
      if (std::chrono::steady_clock::now() - started > 2s) return fail("woke too late");
      return (*group)->agree(Status::ok()).code() == LH_ERR_ABORTED ? 0 : fail("agree after abort");
    });
  EXPECT_EQ(procs.wait(0), 0);
  EXPECT_EQ(procs.wait(1), 0);
}

TEST(ShmLocalGroup, ARankThatNeverComesTimesOutNamingIt) {
  const auto o = options(unique_name(), 0, 3, 4096, 400ms);
  auto group = ShmLocalGroup::create(o);
  ASSERT_FALSE(group);
  EXPECT_EQ(group.status().code(), LH_ERR_TIMEOUT);
  EXPECT_NE(group.status().message().find("rank(s) 1, 2 missing"), std::string::npos)
      << group.status().to_string();
}

TEST(ShmLocalGroup, AStaleSegmentOfADeadCreatorIsNotJoined) {
  const std::string name = unique_name();
  {
    Ranks stale;  // a rank 0 that dies before its group formed leaves its segment behind
    stale.start(0, [&](uint32_t) {
      (void)ShmLocalGroup::create(options(name, 0, 2, 4096, 60s));
      return 0;
    });
    std::this_thread::sleep_for(300ms);
  }
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0) << "the dead creator's segment should still be there";
  close(fd);
  Ranks procs;
  procs.start(1, [&](uint32_t rank) {  // first: finds the stale segment
    auto group = ShmLocalGroup::create(options(name, rank, 2));
    return group ? 0 : fail(group.status().to_string());
  });
  std::this_thread::sleep_for(300ms);
  procs.start(0, [&](uint32_t rank) {
    auto group = ShmLocalGroup::create(options(name, rank, 2));
    return group ? 0 : fail(group.status().to_string());
  });
  EXPECT_EQ(procs.wait(0), 0);
  EXPECT_EQ(procs.wait(1), 0);
}

TEST(ShmLocalGroup, RanksThatDisagreeOnTheShapeAreRefused) {
  const std::string name = unique_name();
  Ranks procs;
  procs.start(0, [&](uint32_t) {  // fails at once, with the other rank's reason, not a timeout
    const auto started = std::chrono::steady_clock::now();
    auto group = ShmLocalGroup::create(options(name, 0, 2, 4096, 20s));
    if (group || group.status().code() != LH_ERR_INVALID_ARGUMENT)
      return fail(group ? "formed" : group.status().to_string());
    if (std::chrono::steady_clock::now() - started > 5s) return fail("waited for its timeout");
    return shm_open(name.c_str(), O_RDONLY, 0) < 0 ? 0 : fail("the name outlived the failure");
  });
  procs.start(1, [&](uint32_t) {
    auto group = ShmLocalGroup::create(options(name, 1, 3));
    if (group || group.status().code() != LH_ERR_INVALID_ARGUMENT ||
        group.status().message().find("rank 0 formed it with 2 ranks") == std::string::npos)
      return fail(group ? "formed" : group.status().to_string());
    return 0;
  });
  EXPECT_EQ(procs.wait(0), 0);
  EXPECT_EQ(procs.wait(1), 0);
}

TEST(ShmLocalGroup, BadOptionsGetClearErrors) {
  auto check = [](const ShmLocalGroupOptions& o, const std::string& words) {
    auto g = ShmLocalGroup::create(o);
    ASSERT_FALSE(g);
    EXPECT_EQ(g.status().code(), LH_ERR_INVALID_ARGUMENT);
    EXPECT_NE(g.status().message().find(words), std::string::npos) << g.status().to_string();
  };
  check(options("/ok", 2, 2), "rank 2 of 2 ranks");
  check(options("/ok", 0, 0), "1 to 64 ranks");
  check(options("/ok", 0, 65), "1 to 64 ranks");
  check(options("/ok", 0, 4, 128), "slot_bytes 128 must be 256");
  check(options("no-slash", 0, 1), "must be '/'");
  check(options("/a/b", 0, 1), "must be '/'");
  check(options("/ok", 0, 1, 4096, 0ms), "timeout");
}

}  // namespace
}  // namespace longhaul::node
