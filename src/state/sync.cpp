#include "state/sync.hpp"

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>

#include <fmt/format.h>

#include "common/log.hpp"
#include "common/mutex.hpp"
#include "state/block_hash.hpp"
#include "state/block_server.hpp"
#include "state/fetcher.hpp"

namespace longhaul::state {
namespace {

// The master's answers to this sync, handed over from the session strand.
class Inbox {
 public:
  void push(Result<wire::ControlMessage> m) {
    MutexLock lock(mu_);
    queue_.push_back(std::move(m));
    cv_.notify_all();
  }
  Result<wire::ControlMessage> pop() {
    MutexLock lock(mu_);
    while (queue_.empty()) cv_.wait(mu_);
    auto m = std::move(queue_.front());
    queue_.pop_front();
    return m;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::deque<Result<wire::ControlMessage>> queue_ GUARDED_BY(mu_);
};

// Waits for the next message of type T from the master.
template <class T>
Result<T> await(Inbox& inbox) {
  auto m = inbox.pop();
  if (!m) return m.status();
  if (auto* t = std::get_if<T>(&*m)) return std::move(*t);
  return protocol_error(fmt::format("unexpected {} from the master during a state sync",
                                    wire::control_type_name(wire::control_type(*m))));
}

Status check_plan(const Registry& registry, const wire::StatePlanMsg& plan) {
  for (const auto& f : plan.fetches) {
    if (f.tensor >= registry.tensors().size())
      return protocol_error(
          fmt::format("the plan names tensor {} of {}", f.tensor, registry.tensors().size()));
    if (f.blocks.back().index >= block_count(registry.tensors()[f.tensor].bytes))
      return protocol_error(fmt::format("the plan names block {} of tensor '{}' which has {}",
                                        f.blocks.back().index, registry.tensors()[f.tensor].name,
                                        block_count(registry.tensors()[f.tensor].bytes)));
  }
  return Status::ok();
}

// The communicator's state_stall_timeout when set; else LONGHAUL_STATE_STALL_TIMEOUT_MS when that
// holds a whole number of milliseconds from 1 to 86 400 000 (docs/state.md), read at every sync;
// else FetchOptions' 30 s.
std::chrono::milliseconds stall_timeout(std::chrono::milliseconds configured) {
  if (configured.count() > 0) return configured;
  const std::chrono::milliseconds fallback = FetchOptions{}.stall_timeout;
  const char* env = std::getenv("LONGHAUL_STATE_STALL_TIMEOUT_MS");
  if (!env) return fallback;
  uint64_t ms = 0;
  const char* end = env + std::strlen(env);
  auto [ptr, ec] = std::from_chars(env, end, ms);
  if (ec != std::errc() || ptr != end || ms == 0 || ms > 86'400'000) {
    log::warn("state", "LONGHAUL_STATE_STALL_TIMEOUT_MS='{}' is not 1..86400000 ms; using {} ms",
              env, fallback.count());
    return fallback;
  }
  return std::chrono::milliseconds(ms);
}

// How compressible chunks travel: LONGHAUL_STATE_ZSTD = auto (the default), never or always
// (docs/state.md). Read at every sync.
ZstdPolicy zstd_policy() {
  const char* env = std::getenv("LONGHAUL_STATE_ZSTD");
  if (!env || std::strcmp(env, "auto") == 0) return ZstdPolicy::kAuto;
  if (std::strcmp(env, "never") == 0) return ZstdPolicy::kNever;
  if (std::strcmp(env, "always") == 0) return ZstdPolicy::kAlways;
  log::warn("state", "LONGHAUL_STATE_ZSTD='{}' is not auto, never or always; using auto", env);
  return ZstdPolicy::kAuto;
}

// The state hash (Registry::hash) of the content this peer holds once `plan` is fetched: the
// reported block hashes with each fetched block's verified hash in its place. Costs no hashing of
// tensor data; the status page compares it between the members of a group.
uint64_t planned_state_hash(const Registry& registry, const wire::StateReportMsg& report,
                            const wire::StatePlanMsg& plan) {
  std::vector<std::vector<uint64_t>> hashes;
  for (const auto& t : report.tensors) hashes.push_back(t.block_hashes);
  for (const auto& f : plan.fetches)
    for (const auto& b : f.blocks) hashes[f.tensor][b.index] = b.hash;
  std::vector<TensorSummary> summary;
  for (size_t i = 0; i < report.tensors.size(); ++i) {
    const auto& t = report.tensors[i];
    summary.push_back(
        {t.name, t.dtype, t.count, tensor_hash(registry.tensors()[i].bytes, hashes[i])});
  }
  return state_hash(summary);
}

// Sends the session's inbound state links to `server` while it lives (afterwards they are
// refused). Until a communicator's first sync the mesh refuses them itself, as no fetcher has a
// reason to come; setting the same route again at a later sync changes nothing.
void route_state_links(const StateNetwork& network, BlockServer& server) {
  network.route_service_links(
      [weak = server.weak_from_this()](const std::shared_ptr<net::Link>& link,
                                       Result<wire::ControlMessage> m) {
        if (auto self = weak.lock())
          self->on_service_message(link, std::move(m));
        else
          link->close(closed_error("this peer serves no state"));
      });
}

// Sends the report; one too long for a control message fails here, saying what to change.
Status send_report(peer::GroupControl& group, const wire::StateReportMsg& report) {
  Status sent = group.send_state_message(report);
  if (sent.code() != LH_ERR_UNSUPPORTED) return sent;
  return Status(LH_ERR_UNSUPPORTED,
                fmt::format("the state report of {} tensors is too large for the master: {} (each "
                            "tensor costs its name and 8 bytes per MiB; register fewer tensors, "
                            "shorter names, or split the state over several lh_state objects)",
                            report.tensors.size(), sent.message()));
}

}  // namespace

wire::StateReportMsg make_report(const Registry& registry, runtime::WorkerPool& workers,
                                 uint64_t epoch, wire::SyncStrategy strategy) {
  wire::StateReportMsg r;
  r.epoch = epoch;
  r.block_bytes = kBlockBytes;
  r.revision = registry.revision();
  r.strategy = strategy;
  auto digests = registry.digest(workers);
  for (size_t i = 0; i < digests.size(); ++i) {
    const Tensor& t = registry.tensors()[i];
    wire::TensorReport tr;
    tr.name = t.name;
    tr.dtype = static_cast<uint8_t>(t.dtype);
    tr.count = t.count;
    tr.block_hashes = std::move(digests[i].block_hashes);
    tr.compressible = std::move(digests[i].compressible);
    r.tensors.push_back(std::move(tr));
  }
  return r;
}

Status sync_state(peer::GroupControl& group, const StateNetwork& network, Registry& registry,
                  wire::SyncStrategy strategy, SyncResult* result) {
  *result = {};
  if (!network.runtime || !network.server || !network.route_service_links)
    return invalid_argument("a state sync needs a runtime, a block server and a route for links");
  runtime::Runtime& runtime = *network.runtime;
  BlockServer& server = *network.server;
  if (Status f = group.failure(); !f) return f;
  const uint64_t epoch = group.view().epoch;
  if (epoch == 0) return invalid_argument("lh_sync_state needs a connected communicator");

  route_state_links(network, server);
  // From the report on, fetchers may ask for blocks: serve until the master releases the group.
  LH_RETURN_IF_ERROR(server.begin(registry));
  struct Serving {
    BlockServer& server;
    SyncResult* result;
    ~Serving() { result->tx_bytes = server.end(); }
  } serving{server, result};
  auto inbox = std::make_shared<Inbox>();
  auto lost = std::make_shared<LostSources>();
  group.set_state_handler([inbox, lost, epoch](Result<wire::ControlMessage> m) {
    // A lost source goes straight to the fetch (which may be running), not through the inbox.
    if (m)
      if (auto* l = std::get_if<wire::StateSourceLostMsg>(&*m)) {
        if (l->epoch == epoch) lost->report(l->peer_id);
        return;
      }
    inbox->push(std::move(m));
  });
  struct Cleanup {
    peer::GroupControl& group;
    ~Cleanup() { group.set_state_handler({}); }
  } cleanup{group};

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  auto report = make_report(registry, runtime.workers(), epoch, strategy);
  const auto hashed = Clock::now();
  LH_RETURN_IF_ERROR(send_report(group, report));
  auto plan = await<wire::StatePlanMsg>(*inbox);
  const auto planned = Clock::now();
  if (!plan) return plan.status();
  if (plan->code != LH_OK) return Status(plan->code, plan->reason);
  LH_RETURN_IF_ERROR(check_plan(registry, *plan));

  FetchOptions options = network.fetch;
  options.stall_timeout = stall_timeout(network.fetch.stall_timeout);
  options.zstd = zstd_policy();
  FetchStats stats;
  Status fetched = fetch_blocks(runtime, options, registry, *plan, lost.get(), &stats);
  result->rx_bytes = stats.rx_bytes;
  result->blocks_fetched = stats.blocks;
  result->sources = stats.sources;
  if (!fetched) log::warn("state", "state sync fetch failed: {}", fetched.to_string());

  LH_RETURN_IF_ERROR(group.send_state_message(wire::StateDoneMsg{
      epoch, fetched.code(), fetched.message().substr(0, wire::kMaxReasonBytes)}));
  const auto done = Clock::now();
  auto complete = await<wire::StateCompleteMsg>(*inbox);
  if (!complete) return complete.status();
  log::debug("state",
             "sync: hashed in {:.1f} ms, plan after {:.1f} ms, fetched {} blocks in {:.1f} ms, "
             "released after {:.1f} ms",
             ms(t0, hashed), ms(hashed, planned), stats.blocks, ms(planned, done),
             ms(done, Clock::now()));
  if (!fetched) return fetched;
  registry.set_revision(plan->revision);
  if (network.stats_board)
    network.stats_board->set_state(plan->revision, planned_state_hash(registry, report, *plan));
  return Status::ok();
}

}  // namespace longhaul::state
