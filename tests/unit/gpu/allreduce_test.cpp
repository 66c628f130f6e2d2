// Collectives of CUDA device memory through the public API, beside a CPU peer: a GPU peer and a
// CPU peer in one ring get the same bytes, for every codec, in place or not, f32 and bf16, in an
// all-reduce, a batch, a reduce-scatter, an all-gather and a broadcast. Skipped, with the reason,
// where there is no CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <longhaul/longhaul.hpp>

#include "tests/unit/gpu/normals.hpp"
#include "tests/unit/gpu/two_peers.hpp"

namespace {

using longhaul::gpu::testing::DeviceBuffer;
using longhaul::gpu::testing::normals;

template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

class GpuAllReduce : public longhaul::gpu::testing::TwoPeers {
 public:
  // The direct schedule needs full_mesh, also in a group of two (docs/collectives.md).
  GpuAllReduce() { full_mesh_ = true; }

 protected:
  // The result both peers get when both hold their input in host memory.
  std::vector<float> host_result(const std::vector<float>& x, const std::vector<float>& y,
                                 const longhaul::AllReduceOptions& o) {
    std::vector<float> a = x, b = y;
    both([&] { gpu().allreduce(std::span(a), longhaul::ReduceOp::kSum, o); },
         [&] { cpu().allreduce(std::span(b), longhaul::ReduceOp::kSum, o); });
    EXPECT_TRUE(same_bytes(a, b));
    return a;
  }
  // `x` in place on the device beside `y` on the CPU peer, with `o`: both end with `want`.
  void expect_in_place_on_the_device(const std::vector<float>& x, const std::vector<float>& y,
                                     const longhaul::AllReduceOptions& o,
                                     const std::vector<float>& want) {
    const std::size_t n = x.size();
    DeviceBuffer buffer(n * sizeof(float));
    buffer.upload(x);
    std::vector<float> cpu_side = y;
    both(
        [&] {
          gpu().allreduce(std::span<float>(buffer.as<float>(), n), longhaul::ReduceOp::kSum, o);
        },
        [&] { cpu().allreduce(std::span(cpu_side), longhaul::ReduceOp::kSum, o); });
    EXPECT_TRUE(same_bytes(buffer.download<float>(), want));
    EXPECT_TRUE(same_bytes(cpu_side, want));
  }
};

TEST_F(GpuAllReduce, AGpuPeerAndACpuPeerGetTheSameBytesForEveryCodec) {
  const std::size_t n = (1u << 20) + 77;
  const std::vector<float> x = normals(n, 1), y = normals(n, 2);
  for (lh_codec codec : {LH_CODEC_NONE, LH_CODEC_BF16, LH_CODEC_U8, LH_CODEC_U4, LH_CODEC_E3M0}) {
    longhaul::AllReduceOptions o;
    o.codec = codec;
    const std::vector<float> want = host_result(x, y, o);

    DeviceBuffer in(n * sizeof(float)), out(n * sizeof(float));
    in.upload(x);
    std::vector<float> cpu_side = y;
    both(
        [&] {
          gpu().allreduce(std::span<const float>(in.as<float>(), n),
                          std::span<float>(out.as<float>(), n), longhaul::ReduceOp::kSum, o);
        },
        [&] { cpu().allreduce(std::span(cpu_side), longhaul::ReduceOp::kSum, o); });
    EXPECT_TRUE(same_bytes(out.download<float>(), want)) << "codec " << codec;
    EXPECT_TRUE(same_bytes(cpu_side, want)) << "codec " << codec;
    EXPECT_TRUE(same_bytes(in.download<float>(), x)) << "the device input is left as it was";
  }
}

TEST_F(GpuAllReduce, InPlaceBf16OnTheDeviceAverages) {
  const std::size_t n = 300001;
  std::vector<std::uint16_t> x(n, 0x4000), y(n, 0x4080);  // bf16 2.0 and 4.0
  DeviceBuffer buffer(n * sizeof(std::uint16_t));
  buffer.upload(x);
  longhaul::AllReduceOptions o;
  o.memory = LH_MEMORY_CUDA;  // declared rather than detected
  both(
      [&] {
        lh_allreduce_options c = o.c_options();
        ASSERT_EQ(lh_allreduce(gpu().get(), buffer.as<void>(), buffer.as<void>(), n, LH_DTYPE_BF16,
                               LH_OP_AVG, &c, nullptr),
                  LH_OK);
      },
      [&] {
        lh_allreduce_options c;
        lh_allreduce_options_init(&c);
        ASSERT_EQ(
            lh_allreduce(cpu().get(), y.data(), y.data(), n, LH_DTYPE_BF16, LH_OP_AVG, &c, nullptr),
            LH_OK);
      });
  const std::vector<std::uint16_t> got = buffer.download<std::uint16_t>();
  EXPECT_EQ(got[0], 0x4040);  // bf16 3.0
  EXPECT_EQ(got[n - 1], 0x4040);
  EXPECT_TRUE(same_bytes(got, y));
}

// In place with the restore waived, the staging pipeline writes the result back segment by
// segment while the operation runs (out of place: the test above); the bytes are the same.
TEST_F(GpuAllReduce, InPlaceWithoutRestoreWritesSegmentsBackAsTheyFinish) {
  const std::size_t n = (16u << 20) + 5;  // 64 MiB: many segments in flight
  const std::vector<float> x = normals(n, 3), y = normals(n, 4);
  for (lh_codec codec : {LH_CODEC_NONE, LH_CODEC_U8}) {
    SCOPED_TRACE(::testing::Message() << "codec " << codec);
    longhaul::AllReduceOptions o;
    o.codec = codec;
    const std::vector<float> want = host_result(x, y, o);
    o.restore_input = false;
    expect_in_place_on_the_device(x, y, o, want);
  }
}

// Quantized, the contributions a GPU peer only sends are encoded on the device and the result is
// decoded there (staging_pipeline.hpp): both schedules (direct: every other member's chunk is
// encoded ahead; ring: one), every blockwise codec, in place with the restore (the landing after
// success) and without it (segment by segment), give a CPU peer's bytes.
TEST_F(GpuAllReduce, EncodedOnTheDeviceEveryScheduleAndBlockwiseCodecGivesTheHostBytes) {
  const std::size_t n = (3u << 20) + 11;
  const std::vector<float> x = normals(n, 5), y = normals(n, 6);
  for (lh_schedule schedule : {LH_SCHEDULE_RING, LH_SCHEDULE_DIRECT})
    for (lh_codec codec : {LH_CODEC_U8, LH_CODEC_U4, LH_CODEC_E3M0})
      for (bool restore : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "schedule " << schedule << ", codec " << codec
                                          << (restore ? ", restore" : ", no restore"));
        longhaul::AllReduceOptions o;
        o.codec = codec;
        o.schedule = schedule;
        const std::vector<float> want = host_result(x, y, o);
        o.restore_input = restore;
        expect_in_place_on_the_device(x, y, o, want);
      }
}

TEST_F(GpuAllReduce, HostMemoryDeclaredCudaAndADeviceResidualAreRefused) {
  std::vector<float> host(16, 1.0f);
  longhaul::AllReduceOptions o;
  o.memory = LH_MEMORY_CUDA;
  try {
    gpu().allreduce(std::span(host), longhaul::ReduceOp::kSum, o);
    ADD_FAILURE() << "host memory declared as device memory was taken";
  } catch (const longhaul::Error& e) {
    EXPECT_EQ(e.status(), LH_ERR_INVALID_ARGUMENT) << e.what();
  }
  DeviceBuffer residual(16 * sizeof(float));
  lh_allreduce_options c;
  lh_allreduce_options_init(&c);
  c.codec = LH_CODEC_U8;
  c.residual = residual.as<float>();
  const void* sends[] = {host.data()};
  void* recvs[] = {host.data()};
  const size_t counts[] = {16};
  EXPECT_EQ(
      lh_allreduce_batch(gpu().get(), sends, recvs, counts, 1, LH_DTYPE_F32, LH_OP_SUM, &c, 1),
      LH_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(lh_comm_last_error(gpu().get())).find("residual"), std::string::npos);
}

// A batch of three on the GPU peer (a device item apart, a device item in place, a host item)
// beside a CPU peer's batch of host items: every result is a host batch's, byte for byte.
TEST_F(GpuAllReduce, ABatchOfDeviceAndHostItemsEndsAsAHostBatch) {
  const std::size_t n[3] = {200'003, 77, 65'536};
  std::vector<float> x[3], y[3];
  for (int i = 0; i < 3; ++i) {
    x[i] = normals(n[i], 40 + i);
    y[i] = normals(n[i], 50 + i);
  }
  lh_allreduce_options o;
  lh_allreduce_options_init(&o);
  o.codec = LH_CODEC_U8;
  const auto batch = [&](longhaul::Communicator& c, const void* const* sends, void* const* recvs) {
    const size_t counts[3] = {n[0], n[1], n[2]};
    ASSERT_EQ(lh_allreduce_batch(c.get(), sends, recvs, counts, 3, LH_DTYPE_F32, LH_OP_SUM, &o, 2),
              LH_OK)
        << lh_comm_last_error(c.get());
  };
  // Both peers in host memory, every item in place.
  std::vector<float> want[3] = {x[0], x[1], x[2]}, theirs[3] = {y[0], y[1], y[2]};
  both(
      [&] {
        const void* s[3] = {want[0].data(), want[1].data(), want[2].data()};
        void* r[3] = {want[0].data(), want[1].data(), want[2].data()};
        batch(gpu(), s, r);
      },
      [&] {
        const void* s[3] = {theirs[0].data(), theirs[1].data(), theirs[2].data()};
        void* r[3] = {theirs[0].data(), theirs[1].data(), theirs[2].data()};
        batch(cpu(), s, r);
      });
  DeviceBuffer in0(n[0] * 4), out0(n[0] * 4), both1(n[1] * 4);
  in0.upload(x[0]);
  both1.upload(x[1]);
  std::vector<float> host2 = x[2], cpu_side[3] = {y[0], y[1], y[2]};
  both(
      [&] {
        const void* s[3] = {in0.as<void>(), both1.as<void>(), host2.data()};
        void* r[3] = {out0.as<void>(), both1.as<void>(), host2.data()};
        batch(gpu(), s, r);
      },
      [&] {
        const void* s[3] = {cpu_side[0].data(), cpu_side[1].data(), cpu_side[2].data()};
        void* r[3] = {cpu_side[0].data(), cpu_side[1].data(), cpu_side[2].data()};
        batch(cpu(), s, r);
      });
  EXPECT_TRUE(same_bytes(out0.download<float>(), want[0]));
  EXPECT_TRUE(same_bytes(in0.download<float>(), x[0])) << "the device input is left as it was";
  EXPECT_TRUE(same_bytes(both1.download<float>(), want[1]));
  EXPECT_TRUE(same_bytes(host2, want[2]));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_bytes(cpu_side[i], theirs[i])) << i;
}

// The gathering collectives and the reduce-scatter, each run twice: both peers in host memory,
// then the GPU peer's buffers on the device. Every buffer ends with the same bytes.
class GpuCollectives : public GpuAllReduce {
 protected:
  // Peer 0 is gpu(), peer 1 cpu(): what each sends and what its output holds before the call.
  struct Buffers {
    std::vector<float> send[2];
    std::vector<float> recv[2];
  };
  using Op = std::function<lh_status(longhaul::Communicator&, const void* send, void* recv)>;

  std::size_t rank(longhaul::Communicator& c) const { return static_cast<std::size_t>(c.rank()); }

  // Runs `op` on both peers, peer 0's buffers on the device when `on_device`; each one's output.
  std::vector<std::vector<float>> run(bool on_device, Buffers b, const Op& op) {
    DeviceBuffer d_send(b.send[0].size() * sizeof(float)), d_recv(b.recv[0].size() * sizeof(float));
    if (on_device) {
      if (!b.send[0].empty()) d_send.upload(b.send[0]);
      d_recv.upload(b.recv[0]);
    }
    both(
        [&] {
          const void* send = b.send[0].empty() ? nullptr
                             : on_device       ? d_send.as<void>()
                                               : b.send[0].data();
          void* recv = on_device ? d_recv.as<void>() : b.recv[0].data();
          ASSERT_EQ(op(gpu(), send, recv), LH_OK) << lh_comm_last_error(gpu().get());
        },
        [&] { ASSERT_EQ(op(cpu(), b.send[1].data(), b.recv[1].data()), LH_OK); });
    if (on_device) b.recv[0] = d_recv.download<float>();
    EXPECT_TRUE(!on_device || same_bytes(d_send.download<float>(), b.send[0]))
        << "the device input is left as it was";
    return {b.recv[0], b.recv[1]};
  }

  void expect_device_as_host(const Buffers& b, const Op& op) {
    const auto want = run(false, b, op);
    const auto got = run(true, b, op);
    for (int p = 0; p < 2; ++p) EXPECT_TRUE(same_bytes(got[p], want[p])) << "peer " << p;
    EXPECT_FALSE(same_bytes(want[0], b.recv[0]) && same_bytes(want[1], b.recv[1]))
        << "the collective wrote the outputs";
  }
};

TEST_F(GpuCollectives, ReduceScatterAllGatherAndBroadcastOfDeviceMemoryEndAsHostOnes) {
  const std::size_t part[2] = {150'001, 150'000};  // by ring position
  const std::size_t total = part[0] + part[1];
  const std::size_t mine[2] = {part[rank(gpu())], part[rank(cpu())]};  // by peer
  for (lh_codec codec : {LH_CODEC_NONE, LH_CODEC_U8}) {
    SCOPED_TRACE(codec);
    lh_allreduce_options o;
    lh_allreduce_options_init(&o);
    o.codec = codec;

    Buffers scatter;
    for (int p = 0; p < 2; ++p) {
      scatter.send[p] = normals(total, 10 + p);
      scatter.recv[p].assign(mine[p], -7.0f);
    }
    expect_device_as_host(scatter, [&](longhaul::Communicator& c, const void* send, void* recv) {
      return lh_reduce_scatter(c.get(), send, recv, part[rank(c)], part, LH_DTYPE_F32, LH_OP_SUM,
                               &o, nullptr);
    });

    Buffers gather;
    for (int p = 0; p < 2; ++p) {
      gather.send[p] = normals(mine[p], 20 + p);
      gather.recv[p].assign(total, -7.0f);
    }
    expect_device_as_host(gather, [&](longhaul::Communicator& c, const void* send, void* recv) {
      return lh_allgather(c.get(), send, part[rank(c)], recv, part, LH_DTYPE_F32, &o, nullptr);
    });

    for (std::uint32_t root : {0u, 1u}) {
      Buffers cast;
      for (int p = 0; p < 2; ++p) cast.recv[p] = normals(total, 30 + p);
      expect_device_as_host(cast, [&](longhaul::Communicator& c, const void*, void* buffer) {
        return lh_broadcast(c.get(), buffer, total, LH_DTYPE_F32, root, &o, nullptr);
      });
    }
  }
}

}  // namespace
