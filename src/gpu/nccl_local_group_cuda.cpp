#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "collective/partition.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/nccl_library.hpp"
#include "gpu/nccl_local_group.hpp"
#include "quant/dtype.hpp"

namespace longhaul::gpu {

namespace {

using Clock = std::chrono::steady_clock;

// The entry points longhaul uses, resolved from the library nccl_library.hpp loaded.
struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRankConfig) init_rank_config;
  decltype(&ncclCommAbort) abort;
  decltype(&ncclCommGetAsyncError) async_error;
  decltype(&ncclReduce) reduce;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclGetErrorString) error_string;
};

template <class F>
void resolve(F& f, const char* name) {
  f = reinterpret_cast<F>(nccl_symbol(name));
}

Result<const NcclApi*> nccl_api() {
  static Result<NcclApi> api = []() -> Result<NcclApi> {
    if (auto loaded = load_nccl(); !loaded) return loaded.status();
    NcclApi a{};
    resolve(a.get_unique_id, "ncclGetUniqueId");
    resolve(a.init_rank_config, "ncclCommInitRankConfig");
    resolve(a.abort, "ncclCommAbort");
    resolve(a.async_error, "ncclCommGetAsyncError");
    resolve(a.reduce, "ncclReduce");
    resolve(a.broadcast, "ncclBroadcast");
    resolve(a.group_start, "ncclGroupStart");
    resolve(a.group_end, "ncclGroupEnd");
    resolve(a.error_string, "ncclGetErrorString");
    return a;
  }();
  if (!api) return api.status();
  return &*api;
}

// NCCL's type for each quant::DType, by the enumeration's value (f32, f64, f16, bf16, i8, u8,
// i32, u32, i64, u64: the ABI's lh_dtype order).
constexpr ncclDataType_t kNcclTypes[] = {ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16,
                                         ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                         ncclInt64,   ncclUint64};

Result<ncclDataType_t> nccl_type(quant::DType t) {
  const auto i = static_cast<size_t>(t);
  if (i >= std::size(kNcclTypes)) return invalid_argument("NCCL local group: unknown dtype");
  return kNcclTypes[i];
}

// Averages are summed inside the node and divided once by the caller (local_group.hpp).
ncclRedOp_t nccl_op(quant::ReduceOp op) {
  switch (op) {
    case quant::ReduceOp::kMin:
      return ncclMin;
    case quant::ReduceOp::kMax:
      return ncclMax;
    case quant::ReduceOp::kProd:
      return ncclProd;
    default:
      return ncclSum;
  }
}

class NcclLocalGroup final : public node::LocalGroup {
 public:
  NcclLocalGroup(std::unique_ptr<node::LocalGroup> bootstrap, int device,
                 std::chrono::milliseconds timeout, const NcclApi* api)
      : bootstrap_(std::move(bootstrap)), device_(device), timeout_(timeout), api_(api) {}

  // Aborts rather than destroys the communicator: ncclCommAbort frees everything at once without
  // waiting on the siblings (a non-blocking communicator's ncclCommDestroy would need its
  // finalize first), and a group whose rank leaves is finished for all of them anyway.
  ~NcclLocalGroup() override {
    DeviceScope scope(device_);
    if (comm_) api_->abort(comm_);
    if (stream_) (void)cudaStreamDestroy(stream_);
    if (scratch_) (void)cudaFree(scratch_);
  }

  // Everything but the rendezvous of create().
  Status form() {
    DeviceScope scope(device_);
    if (!scope.status()) return scope.status();
    // A blocking stream: ordered after work on the legacy default stream, as the GPU layer's
    // copies are; work on the caller's other streams must be synchronised first (longhaul.h).
    Status mine = cuda_check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    ncclUniqueId id{};
    if (mine && rank() == 0) mine = nccl_check(api_->get_unique_id(&id), "ncclGetUniqueId");
    // Rank 0's id reaches every rank through the bootstrap group (an all-gather of id-sized
    // pieces, of which only rank 0's is read); a failure anywhere fails every rank.
    if (Status all = bootstrap_->agree(mine); !all) return all;
    std::vector<std::byte> ids(sizeof id * size());
    if (Status s = bootstrap_->all_gather(&id, ids.data(), ids.size(), quant::DType::kU8); !s)
      return s;
    std::memcpy(&id, ids.data(), sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    mine = nccl_check(api_->init_rank_config(&comm_, static_cast<int>(size()), id,
                                             static_cast<int>(rank()), &config),
                      "ncclCommInitRankConfig");
    if (mine) mine = wait("forming the NCCL communicator", /*stream_too=*/false);
    (void)or_finish(mine);  // the siblings must not stay in their init waiting for this rank
    return bootstrap_->agree(mine);
  }

  uint32_t rank() const override { return bootstrap_->rank(); }
  uint32_t size() const override { return bootstrap_->size(); }

  Status reduce_scatter(const void* input, void* shard, size_t count, quant::DType dtype,
                        quant::ReduceOp op) override {
    if (Status f = failure(); !f) return f;
    return or_finish(reduce_on_device(input, shard, count, dtype, op));
  }

  Status all_gather(const void* shard, void* output, size_t count, quant::DType dtype) override {
    if (Status f = failure(); !f) return f;
    return or_finish(gather_on_device(shard, output, count, dtype));
  }

  Status agree(const Status& mine) override { return bootstrap_->agree(mine); }
  void abort(const Status& why) override { bootstrap_->abort(why); }
  Status failure() const override { return bootstrap_->failure(); }

 private:
  // A failure of this rank's alone (out of device memory, a refused call) must not leave the
  // siblings inside NCCL waiting for it: the communicator and the group end.
  Status or_finish(Status s) {
    if (!s) finish(s);
    return s;
  }

  // The chunks reduced to their owners in device memory; this rank's, through the pinned
  // staging buffer, into `shard`. The copy is queued only once the NCCL group has been enqueued
  // (a non-blocking communicator may still be launching it when ncclGroupEnd returns), and goes
  // to pinned memory, so it never blocks this thread while the kernels wait for a sibling.
  Status reduce_on_device(const void* input, void* shard, size_t count, quant::DType dtype,
                          quant::ReduceOp op) {
    auto type = nccl_type(dtype);
    if (!type) return type.status();
    const size_t es = quant::element_size(dtype);
    const collective::Partition chunks(count, size(), std::max<size_t>(count, 1));
    const size_t bytes = chunks.chunk(rank()).count * es;
    DeviceScope scope(device_);
    if (!scope.status()) return scope.status();
    if (Status s = reserve(bytes); !s) return s;
    const auto* in = static_cast<const std::byte*>(input);
    Status s = enqueue_per_chunk(chunks, "ncclReduce", [&](collective::Range c, int root) {
      return api_->reduce(in + c.begin * es, scratch_, c.count, *type, nccl_op(op), root, comm_,
                          stream_);
    });
    if (s) s = wait("enqueuing the NCCL reduce-scatter", /*stream_too=*/false);
    if (s && bytes)
      s = cuda_check(
          cudaMemcpyAsync(staging_.data(), scratch_, bytes, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (chunk to host)");
    if (s) s = wait("NCCL reduce-scatter", /*stream_too=*/true);
    if (s && bytes) std::memcpy(shard, staging_.data(), bytes);
    return s;
  }

  // `shard` into its place in `output` (through the pinned staging buffer), then every chunk
  // broadcast from its owner, in place.
  Status gather_on_device(const void* shard, void* output, size_t count, quant::DType dtype) {
    auto type = nccl_type(dtype);
    if (!type) return type.status();
    const size_t es = quant::element_size(dtype);
    const collective::Partition chunks(count, size(), std::max<size_t>(count, 1));
    const auto mine = chunks.chunk(rank());
    DeviceScope scope(device_);
    if (!scope.status()) return scope.status();
    if (Status s = reserve(mine.count * es); !s) return s;
    auto* out = static_cast<std::byte*>(output);
    Status s;
    if (mine.count) {
      std::memcpy(staging_.data(), shard, mine.count * es);
      s = cuda_check(cudaMemcpyAsync(out + mine.begin * es, staging_.data(), mine.count * es,
                                     cudaMemcpyHostToDevice, stream_),
                     "cudaMemcpyAsync (chunk to device)");
    }
    if (s)
      s = enqueue_per_chunk(chunks, "ncclBroadcast", [&](collective::Range c, int root) {
        return api_->broadcast(out + c.begin * es, out + c.begin * es, c.count, *type, root, comm_,
                               stream_);
      });
    if (s) s = wait("NCCL all-gather", /*stream_too=*/true);
    return s;
  }

  Status nccl_check(ncclResult_t r, const char* what) const {
    if (r == ncclSuccess || r == ncclInProgress) return Status::ok();
    return internal_error(fmt::format("{}: {}", what, api_->error_string(r)));
  }

  // The device scratch and the pinned staging buffer, each at least `bytes` (kept between calls:
  // every call drains the stream before it returns).
  Status reserve(size_t bytes) {
    if (bytes > scratch_bytes_) {
      if (scratch_) (void)cudaFree(scratch_);
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      if (Status s = cuda_check(cudaMalloc(&scratch_, bytes), "cudaMalloc (chunk scratch)"); !s)
        return s;
      scratch_bytes_ = bytes;
    }
    if (bytes > staging_.size()) {
      auto pinned = PinnedBuffer::allocate(bytes);
      if (!pinned) return pinned.status();
      staging_ = std::move(*pinned);
    }
    return Status::ok();
  }

  // One rooted call per non-empty chunk, as one NCCL group (chunk c rooted at rank c).
  template <class Call>
  Status enqueue_per_chunk(const collective::Partition& chunks, const char* what, Call call) {
    Status s = nccl_check(api_->group_start(), "ncclGroupStart");
    for (uint32_t c = 0; s && c < size(); ++c)
      if (chunks.chunk(c).count) s = nccl_check(call(chunks.chunk(c), static_cast<int>(c)), what);
    const Status end = nccl_check(api_->group_end(), "ncclGroupEnd");
    return s ? end : s;
  }

  // Waits until the communicator has no operation in progress (and, with stream_too, the stream
  // has drained), watching the bootstrap group and the deadline; on any failure the NCCL
  // communicator is aborted (it is finished) and the group with it.
  Status wait(const char* step, bool stream_too) {
    const auto deadline = Clock::now() + timeout_;
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      ncclResult_t async = ncclSuccess;
      Status problem = nccl_check(api_->async_error(comm_, &async), "ncclCommGetAsyncError");
      if (problem) problem = nccl_check(async, step);
      if (problem && async == ncclSuccess) {
        const cudaError_t e = stream_too ? cudaStreamQuery(stream_) : cudaSuccess;
        if (e == cudaSuccess) return Status::ok();
        if (e != cudaErrorNotReady) problem = cuda_check(e, step);
      }
      if (problem) problem = bootstrap_->failure();
      if (problem && Clock::now() >= deadline)
        problem = timeout_error(
            fmt::format("NCCL local group: '{}' did not end within {} ms", step, timeout_.count()));
      if (!problem) {
        finish(problem);
        return bootstrap_->failure();
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  // Aborts the NCCL communicator (its kernels return; later calls fail) and the group.
  void finish(const Status& why) {
    bootstrap_->abort(why);
    if (comm_) api_->abort(comm_);
    comm_ = nullptr;
  }

  std::unique_ptr<node::LocalGroup> bootstrap_;
  int device_;
  std::chrono::milliseconds timeout_;
  const NcclApi* api_;
  ncclComm_t comm_ = nullptr;  // null once aborted
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  PinnedBuffer staging_;
};

}  // namespace

Result<std::unique_ptr<node::LocalGroup>> make_nccl_local_group(
    std::unique_ptr<node::LocalGroup> bootstrap, int device, std::chrono::milliseconds timeout) {
  // Every failure below is agreed with the siblings first, so none waits for this rank.
  Status usable = cuda_available();
  auto api = usable ? nccl_api() : Result<const NcclApi*>(usable);
  if (usable && !api) usable = api.status();
  if (usable && device < 0) usable = cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  if (Status all = bootstrap->agree(usable); !all) return all;
  auto group = std::make_unique<NcclLocalGroup>(std::move(bootstrap), device, timeout, *api);
  if (Status s = group->form(); !s) return s;
  return std::unique_ptr<node::LocalGroup>(std::move(group));
}

}  // namespace longhaul::gpu
