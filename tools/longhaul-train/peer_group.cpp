#include "peer_group.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace longhaul::train::cli {
namespace {

std::atomic<int> g_stop_signals{0};
static_assert(std::atomic<int>::is_always_lock_free, "used from a signal handler");

void on_stop_signal(int sig) {
  if (g_stop_signals.fetch_add(1) > 0) _exit(128 + sig);
}

}  // namespace

void install_stop_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  // A neighbour that vanishes mid-write must fail the write, not end the process.
  signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() {
  return g_stop_signals.load() > 0;
}

bool retryable(lh_status s) {
  return s == LH_ERR_PEER_LOST || s == LH_ERR_ABORTED || s == LH_ERR_TIMEOUT;
}

Result<std::unique_ptr<PeerGroup>> PeerGroup::join(const PeerOptions& p) {
  lh_comm_options o;
  lh_comm_options_init(&o);
  o.master_address = p.master.c_str();
  o.secret = p.secret.empty() ? nullptr : p.secret.c_str();
  o.listen_address = p.listen.c_str();
  o.advertised_address = p.advertise.empty() ? nullptr : p.advertise.c_str();
  o.full_mesh = p.full_mesh ? 1 : 0;
  o.connections_per_link = p.connections;
  lh_comm* comm = nullptr;
  if (lh_status s = lh_comm_create(&o, &comm); s != LH_OK)
    return Status(s, std::string("creating the communicator: ") + lh_last_error());
  std::unique_ptr<PeerGroup> group(new PeerGroup(comm));
  if (lh_status s = lh_comm_connect(comm); s != LH_OK)
    return group->error(s, "joining " + p.master);
  // The initial peers start together: each re-forms the ring (admitting the others as they
  // arrive) until the group is whole.
  while (!p.join && group->attribute(LH_ATTR_GROUP_WORLD_SIZE) < p.peers && !stop_requested()) {
    if (lh_status s = lh_comm_update_topology(comm); s != LH_OK)
      return group->error(s, "waiting for the group");
  }
  std::fprintf(stderr, "peer %lld: in a group of %lld (epoch %lld)\n",
               static_cast<long long>(group->attribute(LH_ATTR_PEER_ID)),
               static_cast<long long>(group->attribute(LH_ATTR_GROUP_WORLD_SIZE)),
               static_cast<long long>(group->attribute(LH_ATTR_EPOCH)));
  return group;
}

PeerGroup::~PeerGroup() {
  lh_comm_destroy(comm_);
}

std::int64_t PeerGroup::attribute(lh_attribute a) {
  std::int64_t v = 0;
  (void)lh_comm_get_attribute(comm_, a, &v);  // fails only for an unknown attribute
  return v;
}

std::vector<std::uint64_t> PeerGroup::ring() {
  std::vector<std::uint64_t> ids(16);
  for (;;) {
    std::size_t count = 0;
    (void)lh_comm_get_ring(comm_, ids.data(), ids.size(), &count);
    if (count <= ids.size()) {
      ids.resize(count);
      return ids;
    }
    ids.resize(count);
  }
}

lh_traffic PeerGroup::traffic() {
  lh_traffic t{};
  (void)lh_comm_get_traffic(comm_, &t);
  return t;
}

Status PeerGroup::error(lh_status code, const std::string& what) const {
  return Status(code, what + ": " + lh_comm_last_error(comm_));
}

Status PeerGroup::leave(const std::string& reason) {
  if (lh_status s = lh_comm_leave(comm_, reason.c_str()); s != LH_OK)
    return error(s, "leaving the group");
  return Status::ok();
}

}  // namespace longhaul::train::cli
