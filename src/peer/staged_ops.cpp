#include "peer/staged_ops.hpp"

#include <functional>
#include <utility>

#include <fmt/format.h>

#include "gpu/staged_collectives.hpp"

namespace longhaul::peer {

size_t MemberCounts::total() const {
  size_t t = 0;
  for (size_t c : counts) t += c;
  return t;
}

StagedOps::StagedOps(GroupControl& group, Collectives& collectives)
    : group_(group), collectives_(collectives), settled_(group, collectives) {}

Result<MemberCounts> StagedOps::member_counts(size_t count, const size_t* counts) const {
  if (Status s = group_.failure(); !s) return s;
  const auto view = collectives_.ring_view();  // before admission: a group of one
  MemberCounts g;
  g.rank = view.rank;
  g.counts = counts ? std::vector<size_t>(counts, counts + view.size)
                    : std::vector<size_t>(view.size, count);
  return g;
}

Result<MemberCounts> StagedOps::reduce_scatter_parts(size_t recv_count,
                                                     const size_t* recv_counts) const {
  auto parts = member_counts(recv_count, recv_counts);
  if (!parts) return parts.status();
  if (parts->counts[parts->rank] != recv_count)
    return invalid_argument(fmt::format("recv_count {} differs from recv_counts[{}] = {}",
                                        recv_count, parts->rank, parts->counts[parts->rank]));
  return parts;
}

Result<std::shared_ptr<collective::AllReduceOp>> StagedOps::allreduce(
    collective::AllReduceSpec spec, gpu::Memory memory) {
  if (auto staged = gpu::stage_device_buffers(spec, memory); !staged) return staged.status();
  return collectives_.allreduce(spec);
}

Status StagedOps::allreduce_settled(collective::AllReduceSpec spec, gpu::Memory memory,
                                    std::optional<collective::OpInfo>* info) {
  // Staged per segment, the result would land in the caller's device buffer at the member's own
  // success, before the group's decision: staged whole, it lands only after an OK.
  LH_RETURN_IF_ERROR(gpu::residual_on_host(spec.residual, memory));
  gpu::BatchBuffers buffer{spec.input, spec.output, spec.count};
  auto landings = gpu::stage_device_buffers(std::span(&buffer, 1), spec.dtype, memory);
  if (!landings) return landings.status();
  spec.input = buffer.input;
  spec.output = buffer.output;
  Status s = settled_.run(std::move(spec), info);
  for (const auto& land : *landings)
    if (s) s = land();
  return s;
}

Result<std::shared_ptr<collective::AllReduceOp>> StagedOps::reduce_scatter(
    collective::AllReduceSpec whole, MemberCounts parts, gpu::Memory memory) {
  const size_t part_count = parts.counts[parts.rank];
  whole.scatter_output = whole.output;
  whole.output = nullptr;
  whole.chunk_counts = std::move(parts.counts);
  if (auto staged = gpu::stage_device_buffers(whole, memory, part_count); !staged)
    return staged.status();
  return collectives_.allreduce(whole);
}

Result<std::shared_ptr<collective::GatherOp>> StagedOps::allgather(collective::GatherSpec spec,
                                                                   const void* send,
                                                                   size_t send_count, void* recv,
                                                                   const size_t* recv_counts,
                                                                   gpu::Memory memory) {
  auto layout = member_counts(send_count, recv_counts);
  if (!layout) return layout.status();
  if (layout->counts[layout->rank] != send_count)
    return invalid_argument(fmt::format("send_count {} differs from recv_counts[{}] = {}",
                                        send_count, layout->rank, layout->counts[layout->rank]));
  spec.input = send;
  spec.output = recv;
  spec.counts = std::move(layout->counts);
  return staged_gather(std::move(spec), layout->rank, memory);
}

Result<std::shared_ptr<collective::GatherOp>> StagedOps::broadcast(collective::GatherSpec spec,
                                                                   void* buffer, size_t count,
                                                                   uint32_t root,
                                                                   gpu::Memory memory) {
  auto layout = member_counts(0, nullptr);
  if (!layout) return layout.status();
  if (root >= layout->counts.size())
    return invalid_argument(fmt::format("root {} is not a ring position of a group of {}", root,
                                        layout->counts.size()));
  // An all-gather in which only the root contributes, in place.
  layout->counts[root] = count;
  spec.call = collective::Call::kBroadcast;
  spec.root = root;
  spec.input = root == layout->rank ? buffer : nullptr;
  spec.output = buffer;
  spec.counts = std::move(layout->counts);
  return staged_gather(std::move(spec), layout->rank, memory);
}

Result<std::shared_ptr<collective::GatherOp>> StagedOps::barrier(collective::GatherSpec spec) {
  auto layout = member_counts(0, nullptr);
  if (!layout) return layout.status();
  spec.counts = std::move(layout->counts);
  spec.call = collective::Call::kBarrier;
  return collectives_.gather(spec);
}

Result<std::shared_ptr<collective::GatherOp>> StagedOps::staged_gather(collective::GatherSpec spec,
                                                                       size_t rank,
                                                                       gpu::Memory memory) {
  if (auto staged = gpu::stage_device_buffers(spec, memory, rank); !staged) return staged.status();
  return collectives_.gather(spec);
}

Status StagedOps::allreduce_batch(const std::vector<BatchItem>& items,
                                  collective::AllReduceSpec spec, gpu::Memory memory,
                                  uint32_t max_attempts) {
  if (spec.residual && items.size() != 1)
    return invalid_argument("an error-feedback residual serves a batch of one");
  std::vector<gpu::BatchBuffers> buffers;
  for (const auto& item : items) buffers.push_back({item.input, item.output, item.count});
  LH_RETURN_IF_ERROR(gpu::residual_on_host(spec.residual, memory));
  auto landings = gpu::stage_device_buffers(buffers, spec.dtype, memory);
  if (!landings) return landings.status();
  std::vector<BatchItem> staged;
  for (const auto& b : buffers) staged.push_back({b.input, b.output, b.count});
  Status s = peer::allreduce_batch(group_, collectives_, staged, std::move(spec), max_attempts);
  for (const auto& land : *landings)
    if (s) s = land();
  return s;
}

}  // namespace longhaul::peer
