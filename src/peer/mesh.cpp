#include "peer/mesh.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <asio/post.hpp>

#include "common/log.hpp"

namespace longhaul::peer {
namespace {

// The entry of `table` (a map of Mesh::Waiting) that has waited longest.
template <class Table>
auto oldest(Table& table) {
  return std::min_element(table.begin(), table.end(), [](const auto& a, const auto& b) {
    return a.second.serial < b.second.serial;
  });
}

}  // namespace

Result<std::shared_ptr<Mesh>> Mesh::create(runtime::IoRuntime& io, Strand strand,
                                           const CommunicatorOptions& options,
                                           std::shared_ptr<net::TrafficCounter> data_traffic) {
  std::string host;
  uint16_t port = 0;
  LH_RETURN_IF_ERROR(
      net::parse_host_port(options.listen_address, &host, &port).with_context("listen address"));
  if (options.transport.tls.enabled &&
      (options.transport.tls.cert_file.empty() || options.transport.tls.key_file.empty()))
    return invalid_argument(
        "with TLS on, a peer needs a certificate and key for its data-link listener");
  net::TransportOptions transport = options.transport;
  transport.role = net::Role::kPeer;
  auto listener = net::Listener::create(io, host, port, transport);
  if (!listener) return listener.status();
  return std::shared_ptr<Mesh>(
      new Mesh(io, std::move(strand), options, std::move(*listener), std::move(data_traffic)));
}

Mesh::Mesh(runtime::IoRuntime& io, Strand strand, const CommunicatorOptions& options,
           std::shared_ptr<net::Listener> listener,
           std::shared_ptr<net::TrafficCounter> data_traffic)
    : io_(io),
      strand_(std::move(strand)),
      options_(options),
      listener_(std::move(listener)),
      data_traffic_(std::move(data_traffic)),
      deadline_(strand_) {}

void Mesh::start(ReadyHandler on_ready, LostHandler on_lost) {
  on_ready_ = std::move(on_ready);
  on_lost_ = std::move(on_lost);
  listener_->start([weak = weak_from_this()](std::shared_ptr<net::Link> link, net::Role role) {
    auto self = weak.lock();
    if (!self || role != net::Role::kPeer) {
      link->close(protocol_error("only peers may open data links"));
      return;
    }
    asio::post(self->strand_, [self, link] { self->on_inbound(link); });
  });
}

void Mesh::set_service_handler(ServiceHandler handler) {
  on_service_ = std::move(handler);
}

void Mesh::start_link(const std::shared_ptr<net::Link>& link) {
  std::weak_ptr<Mesh> weak = weak_from_this();
  std::weak_ptr<net::Link> weak_link = link;
  link->start(
      [weak, weak_link](std::vector<std::byte> bytes) {
        auto self = weak.lock();
        auto l = weak_link.lock();
        if (self && l)
          asio::post(self->strand_,
                     [self, l, bytes = std::move(bytes)] { self->on_link_control(l, bytes); });
      },
      [weak, weak_link](const Status& why) {
        auto self = weak.lock();
        auto l = weak_link.lock();
        if (self && l) asio::post(self->strand_, [self, l, why] { self->on_link_failed(l, why); });
      });
}

void Mesh::on_inbound(std::shared_ptr<net::Link> link) {
  if (closed_) {
    link->close();
    return;
  }
  if (anonymous_.size() >= kMaxInboundLinksPerState) {
    const auto silent = oldest(anonymous_)->second.link;  // forget_anonymous erases the entry
    log::warn("peer", "closing data link from {}: {} links wait to introduce themselves",
              silent->peer(), anonymous_.size());
    silent->close(closed_error("too many links that have not introduced themselves"));
    forget_anonymous(silent);
  }
  // Only ring links post receives: until this one is one, DATA on it waits in the kernel, and
  // it may send only short messages.
  link->set_max_unexpected_bytes(0);
  link->set_max_control_bytes(kMaxIntroductionBytes);
  anonymous_.emplace(link.get(), waiting(link, 0));
  start_link(link);
}

Mesh::Waiting Mesh::waiting(const std::shared_ptr<net::Link>& link, uint64_t epoch) {
  Waiting w{link, ++next_serial_, epoch,
            std::make_unique<asio::steady_timer>(strand_, options_.link_timeout)};
  w.deadline->async_wait([weak = weak_from_this(), serial = w.serial](asio::error_code ec) {
    auto self = weak.lock();
    if (!ec && self) self->expire(serial);
  });
  return w;
}

void Mesh::expire(uint64_t serial) {
  for (auto& [raw, w] : anonymous_) {
    if (w.serial != serial) continue;
    const auto silent = w.link;  // forget_anonymous erases the entry
    log::warn("peer", "closing data link from {}: no PEER_HELLO in time", silent->peer());
    silent->close(timeout_error("no PEER_HELLO in time"));
    forget_anonymous(silent);
    return;
  }
  for (auto it = early_hellos_.begin(); it != early_hellos_.end(); ++it) {
    if (it->second.serial != serial) continue;
    const auto parked = it->second.link;
    const Status why = timeout_error(fmt::format(
        "epoch {} was not proposed here within {} ms", it->second.epoch,
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.link_timeout).count()));
    early_hellos_.erase(it);
    log::warn("peer", "closing data link from {}: {}", parked->peer(), why.message());
    close_parked(parked, why);
    return;
  }
}

void Mesh::propose(const Topology& topology) {
  if (closed_) return;
  Proposal p;
  p.topology = topology;
  for (PeerId n : options_.full_mesh ? topology.others() : topology.neighbours())
    p.neighbours.insert(n);
  proposal_ = std::move(p);
  lost_before_commit_.clear();
  for (auto it = links_.begin(); it != links_.end();) {
    if (!proposal_->neighbours.contains(it->first)) {
      it->second->close(closed_error("no longer ring neighbours"));
      it = links_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = early_hellos_.begin(); it != early_hellos_.end();) {
    if (it->second.epoch < topology.epoch) {
      close_parked(it->second.link, closed_error("introduced for a superseded epoch"));
      it = early_hellos_.erase(it);
    } else {
      ++it;
    }
  }
  const uint64_t epoch = topology.epoch;
  for (PeerId n : proposal_->neighbours) {
    if (topology.self < n) {
      auto it = links_.find(n);
      if (it != links_.end() && it->second->failure().is_ok()) {
        send_hello(n);
        continue;
      }
      if (it != links_.end()) links_.erase(it);
      const wire::MemberInfo* m = topology.member(n);
      net::TransportOptions transport = options_.transport;
      transport.role = net::Role::kPeer;
      net::async_connect_link(
          io_, m->host, m->port, options_.connections_per_link, transport,
          [weak = weak_from_this(), epoch, n](Result<std::shared_ptr<net::Link>> r) {
            auto self = weak.lock();
            if (!self) {
              if (r) (*r)->close();
              return;
            }
            asio::post(self->strand_, [self, epoch, n, r = std::move(r)]() mutable {
              self->on_connected(epoch, n, std::move(r));
            });
          });
    } else if (auto e = early_hellos_.find(n);
               e != early_hellos_.end() && e->second.epoch == epoch) {
      auto link = e->second.link;
      early_hellos_.erase(e);
      accept_hello(n, link);
    }
  }
  deadline_.expires_after(options_.link_timeout);
  deadline_.async_wait([weak = weak_from_this(), epoch](asio::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->proposal_ || self->proposal_->topology.epoch != epoch) return;
    self->maybe_answer(true);
  });
  maybe_answer(false);
}

void Mesh::send_hello(PeerId to) {
  links_.at(to)->send_control(wire::encode_control(
      wire::PeerHelloMsg{proposal_->topology.epoch, proposal_->topology.self}));
}

void Mesh::on_connected(uint64_t epoch, PeerId to, Result<std::shared_ptr<net::Link>> result) {
  if (closed_ || !proposal_ || proposal_->topology.epoch != epoch) {
    if (result) (*result)->close(closed_error("superseded epoch"));
    return;
  }
  if (!result) {
    log::warn("peer", "epoch {}: cannot link to neighbour {}: {}", epoch, to,
              result.status().to_string());
    mark(to, false);
    return;
  }
  links_[to] = *result;
  (*result)->count_traffic(data_traffic_);
  start_link(*result);
  send_hello(to);
}

void Mesh::accept_hello(PeerId from, const std::shared_ptr<net::Link>& link) {
  auto it = links_.find(from);
  if (it != links_.end() && it->second != link)
    it->second->close(closed_error("replaced by a newer link"));
  links_[from] = link;
  // A ring link now.
  link->set_max_unexpected_bytes(options_.transport.max_unexpected_bytes);
  link->set_max_control_bytes(options_.transport.limits.max_control_payload);
  link->send_control(wire::encode_control(
      wire::PeerHelloAckMsg{proposal_->topology.epoch, proposal_->topology.self}));
  mark(from, true);
}

void Mesh::on_link_control(const std::shared_ptr<net::Link>& link,
                           const std::vector<std::byte>& bytes) {
  if (closed_) return;
  auto message = wire::decode_control(bytes);
  // A service link speaks the service's protocol; its messages, undecodable ones included, are the
  // service's to judge.
  if (service_links_.contains(link.get())) {
    if (on_service_) on_service_(link, std::move(message));
    return;
  }
  const Status violation = message ? handle(link, std::move(*message)) : message.status();
  if (violation.is_ok()) return;
  log::warn("peer", "closing data link from {}: {}", link->peer(), violation.to_string());
  link->close(violation);
}

Status Mesh::handle(const std::shared_ptr<net::Link>& link, wire::ControlMessage message) {
  const wire::ControlType type = wire::control_type(message);
  return std::visit(
      [this, &link, type](auto& m) -> Status {
        if constexpr (requires { this->on(link, std::move(m)); })
          return this->on(link, std::move(m));
        else
          return unexpected(type);  // a control-plane message, or one for state links only
      },
      message);
}

Status Mesh::unexpected(wire::ControlType type) {
  return protocol_error(fmt::format("unexpected {} on a data link", wire::control_type_name(type)));
}

// Legal on every link that is not a service link: a neighbour with a smaller id introduces a new
// link, or re-confirms an old one, for an epoch.
Status Mesh::on(const std::shared_ptr<net::Link>& link, const wire::PeerHelloMsg& hello) {
  const uint64_t current =
      proposal_ ? proposal_->topology.epoch : (committed_ ? committed_->epoch : 0);
  if (hello.epoch < current) return Status::ok();  // for a superseded proposal; a newer one follows
  forget_anonymous(link);
  if (!proposal_ || hello.epoch > current) {
    hold_early_hello(hello, link);
    return Status::ok();
  }
  const PeerId self = proposal_->topology.self;
  if (hello.peer_id >= self || !proposal_->neighbours.contains(hello.peer_id))
    return protocol_error(
        fmt::format("PEER_HELLO from peer {} which is not a neighbour that connects to "
                    "peer {} in epoch {}",
                    hello.peer_id, self, current));
  accept_hello(hello.peer_id, link);
  return Status::ok();
}

// The hello is for an epoch this peer has not been proposed yet: propose() accepts it then, if it
// comes within link_timeout (the neighbour gives up on the epoch by then too). One entry per link
// and per claimed peer id, at most kMaxInboundLinksPerState in all.
void Mesh::hold_early_hello(const wire::PeerHelloMsg& hello,
                            const std::shared_ptr<net::Link>& link) {
  for (auto it = early_hellos_.begin(); it != early_hellos_.end(); ++it) {
    if (it->second.link == link) {
      early_hellos_.erase(it);
      break;
    }
  }
  if (auto it = early_hellos_.find(hello.peer_id); it != early_hellos_.end()) {
    close_parked(it->second.link, closed_error("replaced by a newer link"));
    early_hellos_.erase(it);
  } else if (early_hellos_.size() >= kMaxInboundLinksPerState) {
    auto first = oldest(early_hellos_);
    const auto dropped = first->second.link;
    early_hellos_.erase(first);
    log::warn("peer", "closing data link from {}: {} links are parked for epochs not proposed here",
              dropped->peer(), kMaxInboundLinksPerState);
    close_parked(dropped, closed_error("too many links parked for epochs not proposed here"));
  }
  early_hellos_.emplace(hello.peer_id, waiting(link, hello.epoch));
}

// A ring link that was re-introduced for an unknown epoch stays a ring link; any other is closed.
void Mesh::close_parked(const std::shared_ptr<net::Link>& link, const Status& why) {
  if (!neighbour_of(link.get())) link->close(why);
}

void Mesh::forget_anonymous(const std::shared_ptr<net::Link>& link) {
  link->count_traffic(data_traffic_);
  anonymous_.erase(link.get());
}

// Legal only on the link this peer opened to that neighbour for its current proposal; an ack for
// another epoch is stale and ignored.
Status Mesh::on(const std::shared_ptr<net::Link>& link, const wire::PeerHelloAckMsg& ack) {
  if (!proposal_ || ack.epoch != proposal_->topology.epoch) return Status::ok();
  auto it = links_.find(ack.peer_id);
  if (it == links_.end() || it->second != link)
    return protocol_error(
        fmt::format("PEER_HELLO_ACK from peer {} on a link not opened to it", ack.peer_id));
  mark(ack.peer_id, true);
  return Status::ok();
}

// Legal only as the first message of an inbound link, and only while a service takes state links:
// the link becomes a service link and the fetch the service's first message. Beyond
// kMaxInboundLinksPerState service links the fetch is refused and its link closed.
Status Mesh::on(const std::shared_ptr<net::Link>& link, wire::StateFetchMsg&& fetch) {
  if (!on_service_ || !anonymous_.contains(link.get()))
    return unexpected(wire::ControlType::kStateFetch);
  anonymous_.erase(link.get());
  if (service_links_.size() >= kMaxInboundLinksPerState) {
    link->count_traffic(data_traffic_);  // dropped without becoming a service link
    const Status why = aborted_error(
        fmt::format("this peer serves {} state links already", kMaxInboundLinksPerState));
    log::warn("peer", "refusing a state link from {}: {}", link->peer(), why.message());
    link->send_control(
        wire::encode_control(wire::StateFetchFailedMsg{fetch.request, why.code(), why.message()}),
        [link, why](Status) { link->close(why); });
    return Status::ok();
  }
  service_links_[link.get()] = link;
  on_service_(link, wire::ControlMessage(std::move(fetch)));
  return Status::ok();
}

std::optional<PeerId> Mesh::neighbour_of(const net::Link* link) const {
  for (const auto& [id, l] : links_)
    if (l.get() == link) return id;
  return std::nullopt;
}

void Mesh::on_link_failed(const std::shared_ptr<net::Link>& link, const Status& why) {
  if (anonymous_.contains(link.get())) {
    if (why.code() == LH_ERR_PROTOCOL)
      log::warn("peer", "data link from {} failed before introducing itself: {}", link->peer(),
                why.to_string());
    forget_anonymous(link);
  }
  if (service_links_.erase(link.get())) {
    if (on_service_) on_service_(link, why.is_ok() ? closed_error("link closed") : why);
    return;
  }
  for (auto it = early_hellos_.begin(); it != early_hellos_.end(); ++it) {
    if (it->second.link == link) {
      early_hellos_.erase(it);
      break;
    }
  }
  auto n = neighbour_of(link.get());
  if (!n || closed_) return;
  links_.erase(*n);
  if (proposal_ && !proposal_->answered) {
    log::warn("peer", "epoch {}: link to neighbour {} failed while linking: {}",
              proposal_->topology.epoch, *n, why.to_string());
    proposal_->ready.erase(*n);
    mark(*n, false);
  } else if (proposal_) {
    // Once per neighbour: a neighbour that re-links and fails again does not grow the list.
    if (std::none_of(lost_before_commit_.begin(), lost_before_commit_.end(),
                     [&](const auto& lost) { return lost.first == *n; }))
      lost_before_commit_.emplace_back(*n, why);
  } else if (committed_) {
    publish_ring_links();
    if (on_lost_) on_lost_(committed_->epoch, *n, why);
  }
}

void Mesh::mark(PeerId neighbour, bool ok) {
  if (!proposal_ || !proposal_->neighbours.contains(neighbour)) return;
  if (ok) {
    proposal_->failed.erase(neighbour);
    proposal_->ready.insert(neighbour);
  } else {
    proposal_->failed.insert(neighbour);
  }
  maybe_answer(false);
}

void Mesh::maybe_answer(bool deadline_passed) {
  if (!proposal_ || proposal_->answered) return;
  std::vector<PeerId> unreachable;
  for (PeerId n : proposal_->neighbours) {
    if (proposal_->ready.contains(n)) continue;
    if (!deadline_passed && !proposal_->failed.contains(n)) return;  // still linking
    unreachable.push_back(n);
  }
  proposal_->answered = true;
  deadline_.cancel();
  if (on_ready_) on_ready_(proposal_->topology.epoch, std::move(unreachable));
}

void Mesh::commit(uint64_t epoch) {
  if (!proposal_ || proposal_->topology.epoch != epoch) return;
  committed_ = std::move(proposal_->topology);
  proposal_.reset();
  publish_ring_links();
  auto lost = std::move(lost_before_commit_);
  lost_before_commit_.clear();
  for (auto& [n, why] : lost)
    if (on_lost_) on_lost_(epoch, n, why);
}

void Mesh::publish_ring_links() {
  RingLinks r;
  if (committed_) {
    r.epoch = committed_->epoch;
    r.ring = committed_->ring();
    r.rank = committed_->rank();
    const size_t n = r.ring.size();
    if (n > 1) {
      r.left = r.ring[(r.rank + n - 1) % n];
      r.right = r.ring[(r.rank + 1) % n];
      if (auto it = links_.find(r.left); it != links_.end()) r.left_link = it->second;
      if (auto it = links_.find(r.right); it != links_.end()) r.right_link = it->second;
    }
    r.by_rank.resize(n);
    for (size_t i = 0; i < n; ++i)
      if (auto it = links_.find(r.ring[i]); it != links_.end() && i != r.rank)
        r.by_rank[i] = it->second;
  }
  MutexLock lock(ring_mu_);
  ring_links_ = std::move(r);
}

RingLinks Mesh::ring_links() const {
  MutexLock lock(ring_mu_);
  return ring_links_;
}

void Mesh::close(const Status& why) {
  if (closed_) return;
  closed_ = true;
  deadline_.cancel();
  listener_->close();
  for (auto& [id, link] : links_) link->close(why);
  for (auto& [raw, w] : anonymous_) {
    w.link->close(why);
    w.link->count_traffic(data_traffic_);
  }
  for (auto& [id, w] : early_hellos_) w.link->close(why);
  for (auto& [raw, link] : service_links_) link->close(why);
  service_links_.clear();
  links_.clear();
  anonymous_.clear();
  early_hellos_.clear();
  proposal_.reset();
  committed_.reset();
  publish_ring_links();
}

}  // namespace longhaul::peer
