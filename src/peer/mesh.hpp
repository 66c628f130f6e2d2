// The peer-to-peer mesh: this peer's data links to its ring neighbours.
//
// Every peer runs a Listener for its neighbours. For each epoch proposed by the master, the peer
// links to the left and right neighbours of its group's ring (with options.full_mesh, to every
// member of the group): of each pair, the peer with the
// smaller id connects (K connections) and the other accepts, so every pair is linked exactly once.
// The connecting side introduces itself with PEER_HELLO(epoch, id) and the accepting side answers
// PEER_HELLO_ACK once it has the same proposal; a link that is still healthy and still joins
// neighbours is re-confirmed with a new hello instead of reconnected. Once every neighbour is
// linked, or link_timeout passes, the mesh reports which neighbours it could not reach.
//
// Inbound links that introduce themselves with a shared-state message instead of PEER_HELLO are
// handed to the service handler (set_service_handler): the state sync reaches arbitrary peers of
// the group through the same listener and advertised address as the ring links.
//
// Bounds (docs/security.md): an inbound link waits in one of three states before it is a ring
// link or gone: not yet introduced (anonymous), introduced for an epoch this peer has not been
// proposed yet (parked: an honest neighbour may hear of the epoch first), or serving the state
// sync. Anonymous and parked links wait at most link_timeout each, and at most
// kMaxInboundLinksPerState of each kind wait at once (the oldest is closed to make room); at most
// kMaxInboundLinksPerState service links are open at once (the sync's end closes them, a refused
// fetch closes its link). Until a link is a ring link, DATA that arrives on it waits in the kernel
// (Link::set_max_unexpected_bytes(0)): only ring links receive data; and a CONTROL frame longer
// than kMaxIntroductionBytes closes it before anything is allocated for it.
//
// Traffic: every data link, outbound or inbound, counts its frames into the counter given at
// create. An inbound link is counted once it introduced itself with PEER_HELLO, or when it is
// dropped without becoming a service link (its frames until then included); a service link's
// traffic is the service's to count (Link::count_traffic in its handler).
//
// Threading: every method except ring_links() must run on the strand given at construction (the
// peer session's); handlers are invoked on it. ring_links() is thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "common/mutex.hpp"
#include "net/endpoint.hpp"
#include "net/traffic.hpp"
#include "peer/options.hpp"
#include "peer/topology.hpp"

namespace longhaul::peer {

// A group has at most 256 members (collective::kMaxRingSteps + 1), so an honest peer never has
// more inbound links than this in one state at once.
inline constexpr size_t kMaxInboundLinksPerState = 256;
// The longest CONTROL message an inbound link may send before it is a ring link: what it may send
// until then (PEER_HELLO, STATE_FETCH) takes a few dozen bytes.
inline constexpr uint32_t kMaxIntroductionBytes = 1024;

class Mesh : public std::enable_shared_from_this<Mesh> {
 public:
  using Strand = asio::strand<asio::io_context::executor_type>;
  // The links for `epoch` are set up, except to the `unreachable` neighbours.
  using ReadyHandler = std::function<void(uint64_t epoch, std::vector<PeerId> unreachable)>;
  // The link to a neighbour of the committed epoch failed.
  using LostHandler = std::function<void(uint64_t epoch, PeerId neighbour, Status why)>;
  // A service link: an inbound data link that introduced itself with a message other than
  // PEER_HELLO (the shared-state sync's STATE_FETCH). Its messages, decoded, and finally its
  // failure (as a non-OK Result) go to the service's handler.
  using ServiceHandler = std::function<void(const std::shared_ptr<net::Link>& link,
                                            Result<wire::ControlMessage> message)>;

  // Binds the listener (options.listen_address) but accepts nothing until start(). The data links
  // count into `data_traffic` (null: not counted).
  static Result<std::shared_ptr<Mesh>> create(runtime::IoRuntime& io, Strand strand,
                                              const CommunicatorOptions& options,
                                              std::shared_ptr<net::TrafficCounter> data_traffic);
  void start(ReadyHandler on_ready, LostHandler on_lost);
  // Routes service links to `handler` (empty: service links are refused as before).
  void set_service_handler(ServiceHandler handler);
  uint16_t port() const { return listener_->port(); }

  // Starts linking for a proposed epoch, replacing any earlier proposal. Links to peers that are
  // not neighbours in it are closed.
  void propose(const Topology& topology);
  // The proposal for `epoch` is now the committed epoch.
  void commit(uint64_t epoch);
  // Closes the listener and every link; operations on the links fail with `why` (the session's
  // failure, e.g. LH_ERR_NODE_EVICTED, or LH_ERR_CLOSED for a local close).
  void close(const Status& why = closed_error("communicator closed"));

  RingLinks ring_links() const;

 private:
  struct Proposal {
    Topology topology;
    std::set<PeerId> neighbours;
    std::set<PeerId> ready;
    std::set<PeerId> failed;
    bool answered = false;
  };
  Mesh(runtime::IoRuntime& io, Strand strand, const CommunicatorOptions& options,
       std::shared_ptr<net::Listener> listener, std::shared_ptr<net::TrafficCounter> data_traffic);

  void on_inbound(std::shared_ptr<net::Link> link);
  void start_link(const std::shared_ptr<net::Link>& link);
  void on_connected(uint64_t epoch, PeerId to, Result<std::shared_ptr<net::Link>> result);
  void on_link_control(const std::shared_ptr<net::Link>& link, const std::vector<std::byte>& bytes);
  // Sends each message a data link may carry to its one handler below; any other type is a
  // protocol violation. A handler's first lines say on which links and when the message is legal;
  // a non-OK Status from it closes the link.
  Status handle(const std::shared_ptr<net::Link>& link, wire::ControlMessage message);
  Status on(const std::shared_ptr<net::Link>& link, const wire::PeerHelloMsg& hello);
  Status on(const std::shared_ptr<net::Link>& link, const wire::PeerHelloAckMsg& ack);
  Status on(const std::shared_ptr<net::Link>& link, wire::StateFetchMsg&& fetch);
  // The protocol error for a message of `type` that this link may not carry.
  static Status unexpected(wire::ControlType type);
  void hold_early_hello(const wire::PeerHelloMsg& hello, const std::shared_ptr<net::Link>& link);
  // An inbound link waiting in a bounded state (anonymous or parked), with its deadline.
  struct Waiting {
    std::shared_ptr<net::Link> link;
    uint64_t serial = 0;  // arrival order: when a table is full its oldest link goes
    uint64_t epoch = 0;   // parked: the epoch its PEER_HELLO named
    std::unique_ptr<asio::steady_timer> deadline;  // destroyed with the entry, which cancels it
  };
  Waiting waiting(const std::shared_ptr<net::Link>& link, uint64_t epoch);
  // The deadline of the waiting link `serial` passed: closes it if it is still waiting.
  void expire(uint64_t serial);
  // Closes a link that leaves the parked state, unless it is a ring link too.
  void close_parked(const std::shared_ptr<net::Link>& link, const Status& why);
  // The inbound link is no longer anonymous, and not a service link: it counts as a data link.
  void forget_anonymous(const std::shared_ptr<net::Link>& link);
  void on_link_failed(const std::shared_ptr<net::Link>& link, const Status& why);
  void accept_hello(PeerId from, const std::shared_ptr<net::Link>& link);
  void send_hello(PeerId to);
  void mark(PeerId neighbour, bool ok);
  void maybe_answer(bool deadline_passed);
  std::optional<PeerId> neighbour_of(const net::Link* link) const;
  void publish_ring_links();

  runtime::IoRuntime& io_;
  Strand strand_;
  const CommunicatorOptions options_;
  std::shared_ptr<net::Listener> listener_;
  const std::shared_ptr<net::TrafficCounter> data_traffic_;
  asio::steady_timer deadline_;
  ReadyHandler on_ready_;
  LostHandler on_lost_;
  ServiceHandler on_service_;
  bool closed_ = false;

  std::optional<Proposal> proposal_;
  std::optional<Topology> committed_;
  std::map<PeerId, std::shared_ptr<net::Link>> links_;  // by neighbour id
  // Inbound links not yet introduced, and links parked by a hello for an epoch this peer has not
  // been proposed yet (by the peer id they claim). At most kMaxInboundLinksPerState each.
  std::map<const net::Link*, Waiting> anonymous_;
  std::map<PeerId, Waiting> early_hellos_;
  uint64_t next_serial_ = 0;
  std::vector<std::pair<PeerId, Status>> lost_before_commit_;
  std::map<const net::Link*, std::shared_ptr<net::Link>> service_links_;

  mutable Mutex ring_mu_;
  RingLinks ring_links_ GUARDED_BY(ring_mu_);
};

}  // namespace longhaul::peer
