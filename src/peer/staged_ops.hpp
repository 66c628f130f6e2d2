// The collectives a member's caller starts on its own buffers, in host or in CUDA device memory.
// Here a member decides, call by call, what to stage: a buffer in device memory (detected from its
// pointer, or declared with gpu::Memory) runs through pinned host slots
// (gpu/staged_collectives.hpp), so the operation itself is the host one (GPU and CPU members of one
// ring agree bit for bit) and the caller's device buffers are written only once it has succeeded.
// The C API (src/capi) converts its arguments and calls here; a Peer owns one (peer.hpp).
//
// Errors, besides each operation's own: LH_ERR_UNSUPPORTED for device memory where there is no
// usable CUDA device and for an error-feedback residual in device memory; the runtime's error when
// a copy or a pinned slot fails.
//
// Threads: as Collectives (thread-safe to start; the batch one call at a time per member).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "collective/allreduce.hpp"
#include "collective/gather.hpp"
#include "common/status.hpp"
#include "gpu/device_memory.hpp"
#include "peer/batch.hpp"
#include "peer/collectives.hpp"
#include "peer/group.hpp"
#include "peer/settled_allreduce.hpp"

namespace longhaul::peer {

// The committed ring's shape at a call, and each member's count of elements by ring position.
struct MemberCounts {
  size_t rank = 0;
  std::vector<size_t> counts;
  size_t total() const;
};

class StagedOps {
 public:
  // `group` and `collectives` (one member's) must outlive it.
  StagedOps(GroupControl& group, Collectives& collectives);

  // The ring as the collectives see it (before admission: a group of one), with `counts` (one
  // entry per member, in ring order) or `count` for every member when `counts` is null. Fails with
  // the member's failure when it is unusable.
  Result<MemberCounts> member_counts(size_t count, const size_t* counts) const;
  // member_counts() of a reduce-scatter's parts; LH_ERR_INVALID_ARGUMENT when this member's entry
  // of `recv_counts` differs from its `recv_count`.
  Result<MemberCounts> reduce_scatter_parts(size_t recv_count, const size_t* recv_counts) const;

  // An all-reduce (collective::AllReduceSpec, no reduce-scatter output) of buffers in `memory`.
  Result<std::shared_ptr<collective::AllReduceOp>> allreduce(collective::AllReduceSpec spec,
                                                             gpu::Memory memory);
  // The blocking all-reduce (lh_allreduce): allreduce() whose outcome the group agrees on
  // (settled_allreduce.hpp): OK on this member exactly when OK on every member. Device buffers are
  // staged whole, as the batch stages them, and written only once the group decided OK. `info`
  // (may be null) gets the all-reduce's figures.
  Status allreduce_settled(collective::AllReduceSpec spec, gpu::Memory memory,
                           std::optional<collective::OpInfo>* info);
  // A reduce-scatter: `whole` is the all-reduce of every member's part (input: parts.total()
  // elements, count: their total), its output this member's part (parts.counts[parts.rank]
  // elements, from reduce_scatter_parts()).
  Result<std::shared_ptr<collective::AllReduceOp>> reduce_scatter(collective::AllReduceSpec whole,
                                                                  MemberCounts parts,
                                                                  gpu::Memory memory);
  // An all-gather with `spec`'s wire options: this member's `send_count` elements of `send` into
  // its place in `recv`, which receives every member's (`recv_counts`, one per member, or
  // `send_count` each when null). LH_ERR_INVALID_ARGUMENT when this member's entry of
  // `recv_counts` differs from `send_count`.
  Result<std::shared_ptr<collective::GatherOp>> allgather(collective::GatherSpec spec,
                                                          const void* send, size_t send_count,
                                                          void* recv, const size_t* recv_counts,
                                                          gpu::Memory memory);
  // A broadcast of the `count` elements of `buffer` at ring position `root` into every member's
  // `buffer`: an all-gather in which only the root contributes, in place. LH_ERR_INVALID_ARGUMENT
  // when `root` is no ring position.
  Result<std::shared_ptr<collective::GatherOp>> broadcast(collective::GatherSpec spec, void* buffer,
                                                          size_t count, uint32_t root,
                                                          gpu::Memory memory);
  // A barrier: an all-gather of nothing (every member's empty contribution still reaches every
  // member). `spec`: the wire options, no codec.
  Result<std::shared_ptr<collective::GatherOp>> barrier(collective::GatherSpec spec);

  // peer::allreduce_batch (batch.hpp) of `items` in `memory`, with `spec`'s type, op and codec.
  // A residual serves a batch of one (LH_ERR_INVALID_ARGUMENT otherwise). Staged items land in
  // the caller's device buffers once the whole batch has succeeded on every member.
  Status allreduce_batch(const std::vector<BatchItem>& items, collective::AllReduceSpec spec,
                         gpu::Memory memory, uint32_t max_attempts);

 private:
  Result<std::shared_ptr<collective::GatherOp>> staged_gather(collective::GatherSpec spec,
                                                              size_t rank, gpu::Memory memory);
  GroupControl& group_;
  Collectives& collectives_;
  SettledAllReduces settled_;
};

}  // namespace longhaul::peer
