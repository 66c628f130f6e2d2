// The ranks of one node (the processes of one machine that train one replica together, one per
// GPU or local process) as a group that reduces among itself without the network: the
// intra-node half of the hierarchical all-reduce (node/node_group.hpp). Two implementations share
// this interface: shared memory between processes (node/shm_local_group.hpp: host buffers; what
// CPU CI tests) and NCCL (gpu/nccl_local_group.hpp: device buffers).
//
// Memory: `input` and `output` live where the implementation works (host memory for shared
// memory, the rank's device for NCCL); a `shard` is always host memory, since it is what the
// rank sends over the network.
//
// Contract, common to every call:
// - Every rank of the group makes the same calls in the same order with the same counts, dtypes
//   and ops; one call at a time per rank (a group is not thread-safe, except abort()).
// - Chunks: a buffer of `count` elements is cut as collective::Partition(count, size()) cuts it,
//   chunk r (rank r's shard) holding count/size() elements, the first count%size() one more.
// - Results are bit-identical on every rank: each chunk is reduced once, by or for its owner, and
//   every rank gathers those same bytes. The shared-memory group reduces in rank order (0, 1,
//   ..., size()-1) with the kernels of quant/reduce.hpp, so its results are also the same from
//   run to run; NCCL reduces in its own order.
// - A failed call leaves its output unspecified and never touches its input. After abort(), or
//   after a sibling died or stayed silent past the group's timeout, every call on every rank
//   fails: the group is finished (its node is evicted as a whole; docs/protocol.md, "Nodes").
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.hpp"
#include "quant/dtype.hpp"

namespace longhaul::node {

class LocalGroup {
 public:
  virtual ~LocalGroup() = default;

  virtual uint32_t rank() const = 0;
  virtual uint32_t size() const = 0;

  // shard = input's chunk rank() reduced over every rank with `op` (kAvg sums: the caller divides
  // by the whole count of contributions once, after the network's step). `shard` holds the
  // chunk's elements and does not overlap `input`.
  virtual Status reduce_scatter(const void* input, void* shard, size_t count, quant::DType dtype,
                                quant::ReduceOp op) = 0;
  // output = every rank's shard, chunk r from rank r. `shard` holds chunk rank() and may lie
  // inside `output` at that chunk's place (in place), or not overlap it at all.
  virtual Status all_gather(const void* shard, void* output, size_t count, quant::DType dtype) = 0;
  // Every rank learns every rank's outcome: OK when all of them are OK, else the failure of the
  // lowest failed rank (the same status on every rank).
  virtual Status agree(const Status& mine) = 0;

  // Ends the group: calls in progress on any rank return `why` promptly, as does every later
  // call. The first abort's status wins. Thread-safe; may run on any thread, concurrently with a
  // call in progress (the communicator's abort handler calls it when the master evicts the node).
  virtual void abort(const Status& why) = 0;
  // OK while the group works; once it is finished (aborted, a sibling dead or silent, a sibling
  // gone), why. Thread-safe.
  virtual Status failure() const = 0;
};

}  // namespace longhaul::node
