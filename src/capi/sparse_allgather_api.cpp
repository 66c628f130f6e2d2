// lh_sparse_allgather*, lh_sparse_gathered_*: the C face of the sparse all-gather
// (collective/sparse_allgather.hpp) over a peer's collectives, with the sparse codec's decoder as
// its optional check (quant/sparse_codec.hpp) and, on request, settled with the group
// (peer/settle.hpp) as a batch is.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "capi/handles.hpp"
#include "collective/sparse_allgather.hpp"
#include "gpu/device_memory.hpp"
#include "peer/settle.hpp"
#include "quant/sparse_codec.hpp"

namespace lh = longhaul;

// One sparse all-gather's result (and, until it completes, its operation).
struct lh_sparse_gathered {
  std::shared_ptr<lh::collective::SparseAllGather> impl;
  // Peer ids by ring position in the epoch the all-gather ran in; empty when not known.
  std::vector<uint64_t> ring;
  mutable lh::Mutex mu;
  mutable std::string last_error GUARDED_BY(mu);
};

namespace {

using lh::Result;
using lh::Status;
using lh::collective::SparseAllGather;
using lh::collective::SparseGathered;

lh_sparse_allgather_options defaults() {
  const lh::collective::SparseGatherSpec d;
  lh_sparse_allgather_options o{};
  o.schedule = static_cast<lh_schedule>(d.schedule);
  o.segment_bytes = static_cast<uint32_t>(d.segment_bytes);
  o.validate = LH_SPARSE_VALIDATE_NONE;
  o.expected_elements = 0;
  o.max_total_bytes = d.max_total_bytes;
  o.max_attempts = 0;
  return o;
}

// The sparse codec's decoder as the check: header, every record, nothing after the last, and the
// element count when one is expected. An empty contribution is a peer with nothing to send.
lh::collective::ContributionCheck codec_check(uint64_t expected_elements) {
  return [expected_elements](size_t, std::span<const std::byte> bytes) -> Status {
    if (bytes.empty()) return Status::ok();
    auto header = lh::quant::sparse::read_header(bytes);
    if (!header) return header.status();
    if (expected_elements != 0 && header->count != expected_elements)
      return lh::protocol_error(fmt::format("it encodes {} elements, not the {} expected",
                                            header->count, expected_elements));
    return lh::quant::sparse::validate(bytes);
  };
}

// The call's arguments as the collective's spec, checked; `ring` names the members in messages.
Result<lh::collective::SparseGatherSpec> sparse_spec(const void* send, size_t send_bytes,
                                                     const lh_sparse_allgather_options& o,
                                                     const std::vector<uint64_t>& ring) {
  if (send_bytes > 0 && !send) return lh::invalid_argument("send must not be NULL");
  if (o.schedule < LH_SCHEDULE_AUTO || o.schedule > LH_SCHEDULE_DIRECT)
    return lh::invalid_argument(fmt::format("unknown schedule {}", static_cast<int>(o.schedule)));
  if (o.segment_bytes == 0) return lh::invalid_argument("segment_bytes must be positive");
  if (o.validate < LH_SPARSE_VALIDATE_NONE || o.validate > LH_SPARSE_VALIDATE_CODEC)
    return lh::invalid_argument(fmt::format("unknown validation {}", static_cast<int>(o.validate)));
  if (o.expected_elements != 0 && o.validate != LH_SPARSE_VALIDATE_CODEC)
    return lh::invalid_argument("expected_elements needs LH_SPARSE_VALIDATE_CODEC");
  if (send_bytes > 0 && lh::gpu::is_device_pointer(send))
    return Status(LH_ERR_UNSUPPORTED,
                  "the sparse all-gather takes host memory (encode on the host, or copy the "
                  "encoding there first)");
  lh::collective::SparseGatherSpec spec;
  spec.contribution = {static_cast<const std::byte*>(send), send_bytes};
  spec.schedule = static_cast<lh::collective::Schedule>(o.schedule);
  spec.segment_bytes = o.segment_bytes;
  spec.max_total_bytes = o.max_total_bytes;
  if (o.validate == LH_SPARSE_VALIDATE_CODEC) spec.check = codec_check(o.expected_elements);
  if (!ring.empty())
    spec.name_member = [ring](size_t r) {
      return r < ring.size() ? fmt::format("peer {} at ring position {}", ring[r], r)
                             : fmt::format("the member at ring position {}", r);
    };
  return spec;
}

// The group's ring (peer ids) when the collectives' view is of the same epoch; else empty.
std::vector<uint64_t> ring_ids(lh::peer::Peer& peer, uint64_t epoch) {
  const auto view = peer.group().view();
  if (view.epoch != epoch) return {};
  return {view.ring.begin(), view.ring.end()};
}

struct Started {
  std::shared_ptr<SparseAllGather> gather;
  std::vector<uint64_t> ring;
};

// Both steps started over the peer's current ring (the size exchange waited for).
Result<Started> start(lh::peer::Peer& peer, const void* send, size_t send_bytes,
                      const lh_sparse_allgather_options& o) {
  const auto view = peer.collectives().ring_view();
  Started started;
  started.ring = ring_ids(peer, view.epoch);
  auto spec = sparse_spec(send, send_bytes, o, started.ring);
  if (!spec) return spec.status();
  auto g = lh::collective::start_sparse_allgather(
      peer.workers(), view,
      [&peer](const lh::collective::GatherSpec& s) { return peer.collectives().gather(s); },
      std::move(*spec));
  if (!g) return g.status();
  started.gather = std::move(*g);
  return started;
}

lh_status record(const lh_sparse_gathered* r, const Status& s) {
  if (s.is_ok()) return LH_OK;
  {
    lh::MutexLock lock(r->mu);
    r->last_error = s.to_string();
  }
  return lh::capi::fail(s);
}

// The result once its operation completed successfully; why not otherwise.
Result<std::shared_ptr<const SparseGathered>> completed(const lh_sparse_gathered* r) {
  if (auto result = r->impl->result()) return result;
  if (!r->impl->test())
    return lh::invalid_argument(
        "the sparse all-gather has not completed: wait for its lh_op first");
  Status s = r->impl->wait();  // completed: returns at once
  if (s.is_ok()) s = lh::internal_error("a completed sparse all-gather has no result");
  return s;
}

// A result's member at `rank`, checked; the result or why not.
Result<std::shared_ptr<const SparseGathered>> member(const lh_sparse_gathered* r, uint32_t rank,
                                                     const char* function) {
  auto result = completed(r);
  if (!result) return result.status().with_context(function);
  if (rank >= (*result)->members())
    return lh::invalid_argument(fmt::format("{}: rank {} is not a ring position of a group of {}",
                                            function, rank, (*result)->members()));
  return result;
}

void fill_info(lh_op_info* info, const lh::collective::OpInfo& i) {
  if (!info) return;
  info->bytes_sent = i.bytes_sent;
  info->bytes_received = i.bytes_received;
  info->world_size = static_cast<uint32_t>(i.world_size);
  info->schedule = static_cast<lh_schedule>(i.schedule);
}

// The blocking form's ending: the transfer succeeded; a refused contribution is LH_ERR_PROTOCOL
// with the result handed out all the same.
lh_status hand_out_result(lh_comm* comm, Started started, lh_sparse_gathered** result) {
  auto gathered = started.gather->result();
  const Status refusal =
      gathered ? gathered->refusal() : lh::internal_error("a sparse all-gather without result");
  if (gathered)
    *result = new lh_sparse_gathered{std::move(started.gather), std::move(started.ring), {}, {}};
  return lh::capi::finish(comm, refusal);
}

// An error from the start that the group did not number (settle.hpp's reports must match on every
// member): as peer/settled_allreduce.cpp judges it.
bool numbered(const Status& start_error) {
  return lh::peer::retryable(start_error) || start_error.code() == LH_ERR_IO ||
         start_error.code() == LH_ERR_PROTOCOL;
}

// max_attempts >= 1: attempts settled with the group (peer/settle.hpp) as a batch's are.
lh_status settled(lh_comm* comm, const void* send, size_t send_bytes,
                  const lh_sparse_allgather_options& o, lh_sparse_gathered** result,
                  lh_op_info* info) {
  lh::peer::Peer& peer = *comm->impl;
  Started current;
  bool reported = false;
  lh::peer::SettleSteps steps;
  steps.attempt = [&](uint32_t) -> Status {
    current = {};
    auto started = start(peer, send, send_bytes, o);
    if (!started) {
      reported = numbered(started.status());
      return started.status();
    }
    reported = true;
    current = std::move(*started);
    const Status s = current.gather->wait();
    fill_info(info, current.gather->info());
    return s;
  };
  steps.decide = [&](const Status& local) -> Result<lh::peer::SettleSteps::Outcome> {
    lh::peer::SettleSteps::Outcome outcome;
    outcome.failure = local;
    if (!reported) return outcome;
    auto decision = peer.group().decide({.ok = local.is_ok()});
    if (!decision) return decision.status();
    outcome.applied = decision->all_succeeded;
    if (outcome.applied)
      outcome.members = std::move(decision->members);
    else if (local.is_ok())
      outcome.failure = lh::aborted_error(
          "the sparse all-gather failed on another peer, so the group decided it failed "
          "everywhere");
    return outcome;
  };
  steps.restore = [&] { current = {}; };
  lh::peer::SettlePolicy policy;
  policy.max_attempts = o.max_attempts;
  auto settle = lh::peer::settle(peer.group(), steps, policy);
  if (!settle) return lh::capi::finish(comm, settle.status());
  if (!settle->applied) return lh::capi::finish(comm, settle->failure);
  return hand_out_result(comm, std::move(current), result);
}

}  // namespace

extern "C" void lh_sparse_allgather_options_init(lh_sparse_allgather_options* o) {
  if (!o) return;
  *o = defaults();
}

extern "C" lh_status lh_sparse_allgather_async(lh_comm* comm, const void* send, size_t send_bytes,
                                               const lh_sparse_allgather_options* options,
                                               lh_sparse_gathered** result, lh_op** out) {
  if (!out || !result) return lh::capi::null_argument("lh_sparse_allgather_async");
  *out = nullptr;
  *result = nullptr;
  if (lh_status s = lh::capi::check_open(comm, "lh_sparse_allgather_async"); s != LH_OK) return s;
  const lh_sparse_allgather_options o = options ? *options : defaults();
  if (o.max_attempts != 0)
    return lh::capi::finish(
        comm, lh::invalid_argument("lh_sparse_allgather_async: max_attempts serves the "
                                   "blocking lh_sparse_allgather only (set it to 0)"));
  auto started = start(*comm->impl, send, send_bytes, o);
  if (!started) return lh::capi::finish(comm, started.status());
  *out = new lh_op{started->gather->op(), {}, {}};
  *result = new lh_sparse_gathered{std::move(started->gather), std::move(started->ring), {}, {}};
  return LH_OK;
}

extern "C" lh_status lh_sparse_allgather(lh_comm* comm, const void* send, size_t send_bytes,
                                         const lh_sparse_allgather_options* options,
                                         lh_sparse_gathered** result, lh_op_info* info) {
  if (!result) return lh::capi::null_argument("lh_sparse_allgather");
  *result = nullptr;
  if (lh_status s = lh::capi::check_open(comm, "lh_sparse_allgather"); s != LH_OK) return s;
  const lh_sparse_allgather_options o = options ? *options : defaults();
  // A group of one has nobody to disagree with: its own outcome is the group's.
  if (o.max_attempts != 0 && comm->impl->collectives().ring_view().size > 1)
    return settled(comm, send, send_bytes, o, result, info);
  auto started = start(*comm->impl, send, send_bytes, o);
  if (!started) return lh::capi::finish(comm, started.status());
  const Status s = started->gather->wait();
  fill_info(info, started->gather->info());
  if (!s) return lh::capi::finish(comm, s);
  return hand_out_result(comm, std::move(*started), result);
}

extern "C" lh_status lh_sparse_gathered_members(const lh_sparse_gathered* r, uint32_t* members,
                                                uint32_t* rank) {
  if (!r || !members || !rank) return lh::capi::null_argument("lh_sparse_gathered_members");
  auto result = completed(r);
  if (!result) return record(r, result.status().with_context("lh_sparse_gathered_members"));
  *members = static_cast<uint32_t>((*result)->members());
  *rank = static_cast<uint32_t>((*result)->rank());
  return LH_OK;
}

extern "C" lh_status lh_sparse_gathered_contribution(const lh_sparse_gathered* r, uint32_t rank,
                                                     const void** data, size_t* bytes) {
  if (!r || !data || !bytes) return lh::capi::null_argument("lh_sparse_gathered_contribution");
  auto result = member(r, rank, "lh_sparse_gathered_contribution");
  if (!result) return record(r, result.status());
  static const std::byte nothing{};  // where an empty contribution points
  const auto c = (*result)->contribution(rank);
  *data = c.empty() ? &nothing : c.data();
  *bytes = c.size();
  return LH_OK;
}

extern "C" lh_status lh_sparse_gathered_peer_id(const lh_sparse_gathered* r, uint32_t rank,
                                                uint64_t* peer_id) {
  if (!r || !peer_id) return lh::capi::null_argument("lh_sparse_gathered_peer_id");
  auto result = member(r, rank, "lh_sparse_gathered_peer_id");
  if (!result) return record(r, result.status());
  if (r->ring.size() != (*result)->members())
    return record(r, lh::internal_error("lh_sparse_gathered_peer_id: the ring of the all-gather's "
                                        "epoch is not known"));
  *peer_id = r->ring[rank];
  return LH_OK;
}

extern "C" lh_status lh_sparse_gathered_check(const lh_sparse_gathered* r, uint32_t rank) {
  if (!r) return lh::capi::null_argument("lh_sparse_gathered_check");
  auto result = member(r, rank, "lh_sparse_gathered_check");
  if (!result) return record(r, result.status());
  return record(r, (*result)->verdict(rank));
}

extern "C" lh_status lh_sparse_gathered_malformed(const lh_sparse_gathered* r, uint32_t* ranks,
                                                  size_t capacity, size_t* count) {
  if (!r || !count || (capacity > 0 && !ranks))
    return lh::capi::null_argument("lh_sparse_gathered_malformed");
  auto result = completed(r);
  if (!result) return record(r, result.status().with_context("lh_sparse_gathered_malformed"));
  const auto bad = (*result)->malformed();
  for (size_t i = 0; i < bad.size() && i < capacity; ++i) ranks[i] = static_cast<uint32_t>(bad[i]);
  *count = bad.size();
  return LH_OK;
}

extern "C" const char* lh_sparse_gathered_last_error(const lh_sparse_gathered* r) {
  if (!r) return "";
  lh::MutexLock lock(r->mu);
  return r->last_error.c_str();
}

extern "C" void lh_sparse_gathered_destroy(lh_sparse_gathered* r) {
  delete r;  // SparseAllGather's destructor waits for the operation
}
