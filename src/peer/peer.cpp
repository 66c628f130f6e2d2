#include "peer/peer.hpp"

#include "gpu/param_copies.hpp"
#include "peer/node_identity.hpp"
#include "peer/wait_for_peers.hpp"
#include "sync/engine.hpp"

namespace longhaul::peer {

Result<std::unique_ptr<Peer>> Peer::create(const CommunicatorOptions& options,
                                           const runtime::RuntimeOptions& runtime) {
  LH_RETURN_IF_ERROR(validate_node(options));
  std::unique_ptr<Peer> p(new Peer());
  p->runtime_ = std::make_unique<runtime::Runtime>(runtime);
  auto comm = Communicator::create(options, *p->runtime_);
  if (!comm) return comm.status();
  p->comm_ = std::move(*comm);
  p->staged_ = std::make_unique<StagedOps>(p->comm_->group(), *p->comm_);
  p->block_server_ =
      std::make_shared<state::BlockServer>(p->runtime_->workers(), p->comm_->state_traffic());
  state::StateNetwork network;
  network.runtime = p->runtime_.get();
  network.server = p->block_server_.get();
  network.fetch.transport = options.transport;
  network.fetch.connections_per_link = options.connections_per_link;
  network.fetch.stall_timeout = options.state_stall_timeout;
  network.fetch.traffic = p->comm_->state_traffic();
  PeerSession* session = &p->comm_->session();
  network.route_service_links = [session](Mesh::ServiceHandler handler) {
    session->set_service_handler(std::move(handler));
  };
  network.stats_board = &p->comm_->stats_board();
  p->state_sync_ = std::make_unique<state::GroupStateSync>(p->comm_->group(), std::move(network));
  return p;
}

Result<std::unique_ptr<sync::SyncEngine>> Peer::start_sync_engine(sync::EngineOptions options,
                                                                  gpu::Memory declared) {
  for (sync::ParamRange& r : options.ranges) {
    r.on_device = gpu::memory_of(r.data, declared) == gpu::Memory::kCuda;
    if (r.on_device && !options.device_copies) options.device_copies = gpu::device_param_copies();
  }
  sync::EngineServices services;
  services.group = &group();
  services.collectives = &collectives();
  services.state_sync = &state_sync();
  services.workers = &workers();
  services.stats_board = &stats_board();
  return sync::SyncEngine::start(services, std::move(options));
}

Status Peer::connect() {
  const auto deadline = std::chrono::steady_clock::now() + options().connect_timeout;
  LH_RETURN_IF_ERROR(comm_->session().connect());
  if (options().min_peers <= 1) return Status::ok();
  return peer::wait_for_peers(group(), options().min_peers, deadline, "min_peers asks for");
}

Status Peer::wait_for_peers(size_t n, std::chrono::milliseconds timeout) {
  LH_RETURN_IF_ERROR(usable());
  return peer::wait_for_peers(group(), n, std::chrono::steady_clock::now() + timeout);
}

// The members go in reverse order of their declaration, which is the order peer.hpp describes.
Peer::~Peer() = default;

}  // namespace longhaul::peer
