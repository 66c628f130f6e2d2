// Docstrings of the Python API (what an editor shows). The contracts they state are the C API's
// (include/longhaul/longhaul.h); docs/python.md is the guide.
#include "bindings.hpp"

namespace longhaul::py::doc {

const char* const communicator =
    "A peer's communicator: its session with the master and its data links to its group.\n\n"
    "Calls on one communicator must not run concurrently, except the properties (thread-safe) "
    "and allreduce()/Work, which may overlap each other but not update_topology().";

const char* const comm_init =
    "Creates the communicator and binds its data listener; connect() then joins the run.\n\n"
    "Options left None take the library's defaults (lh_comm_options in longhaul.h). Under "
    "torchrun (LOCAL_RANK and LOCAL_WORLD_SIZE set) node, node_rail, node_rails and peer_group "
    "default to the launcher's: node = GROUP_RANK (or the host name), node_rail = peer_group = "
    "LOCAL_RANK, node_rails = LOCAL_WORLD_SIZE. Otherwise a rank is a node of one rail. "
    "node_rail given without peer_group sets peer_group = node_rail. on_eviction: 'raise' (a "
    "NodeEvicted exception from the next call) or 'exit' (the process exits at once with status "
    "4 and a message on stderr, so no rank of the node hangs in an intra-node collective). "
    "master_reconnect_timeout_ms: how long a connected communicator waits for a crashed master "
    "to come back (new operations raise PeerFailure, retryable, meanwhile; see docs/protocol.md, "
    "'Master restart'). link_upload_mbit: an upload cap per data link (docs/transport.md). "
    "min_peers: connect() returns only once the group has that many members (as "
    "wait_for_peers()), within connect_timeout_ms; a group that later shrinks below it keeps "
    "working with fewer. ValueError for bad options.";

const char* const connect =
    "Registers with the master and blocks (GIL released) until admitted, and with min_peers until "
    "the group has that many members; a rank of a node waits for all its node's rails. Returns "
    "self. Raises Timeout after connect_timeout_ms (the message names missing rails, or says how "
    "many of min_peers came: the communicator then stays connected), PeerFailure when the master "
    "is unreachable, ValueError when the node claim is refused, NodeEvicted if another rail of "
    "the node died first, Closed after close().";

const char* const wait_for_peers =
    "Blocks (GIL released) until the group has at least n members, admitting the peers that ask "
    "to join meanwhile (it runs update_topology() for them, which the other members must reach "
    "too), or raises Timeout once `timeout` seconds passed (None: no deadline); the communicator "
    "stays usable after a Timeout. Raises Closed before connect() and after close().";

const char* const update_topology =
    "The reconfiguration point: returns at once when nothing changes, else blocks (GIL released) "
    "until every admitted peer called it and enters the new epoch; while a crashed master is "
    "coming back it waits for it. Raises PeerFailure if the master is lost for good, NodeEvicted "
    "if this node was evicted; any failure ends the communicator.";

const char* const peers_pending =
    "Whether update_topology() has work to do (a joiner waits, a peer or link was lost, or this "
    "communicator failed). No network round trip.";

const char* const close =
    "Leaves the run gracefully (the master logs `reason`) and frees the communicator, destroying "
    "the sync engines started on it first. None: an abrupt leave. Idempotent.";

const char* const traffic =
    "Bytes sent and received since creation, at the sockets, by kind of link: data_*, "
    "control_*, state_*.";

const char* const on_eviction =
    "'raise' or 'exit': what LH_ERR_NODE_EVICTED does to this process (see __init__).";

const char* const last_abort =
    "(epoch, status name, reason) of the last abort the master pushed, or None.";

const char* const allreduce =
    "Starts an all-reduce of `tensor` over the group and returns a Work at once.\n\n"
    "In place unless `out` is given (then `tensor` is only read, and may be read-only). "
    "op: 'sum', 'avg', 'min', 'max', 'prod'. quant: None, 'fp16', 'bf16', 'u8', 'u4' or 'e3m0' "
    "(quantized codecs need float32; the result is bit-identical on every peer). block: "
    "elements per quantization block (default 128). residual: float32 error feedback. "
    "timeout: seconds (None: none) after which the operation fails here with Timeout, its "
    "transfers cancelled at both ends so a peer calling late fails at once (give every peer the "
    "same); unlike Work.wait(timeout), which only stops waiting. "
    "Tensors cross by DLPack, zero-copy: CPU, C-contiguous, a longhaul dtype; a tensor that "
    "requires grad is written as under torch.no_grad(). The Work keeps them alive until done; do "
    "not touch them meanwhile. Bad arguments raise ValueError/TypeError before anything is sent. "
    "Every peer of the group must start its collectives in the same order.";

const char* const allreduce_batch =
    "All-reduces every tensor in place as one batch, all or nothing for the group, retrying "
    "over the survivors (up to max_attempts) when a peer is lost; blocks (GIL released). On "
    "failure the tensors hold their input again and PeerFailure (retry after "
    "update_topology()) or another error is raised. All tensors share one dtype.";

const char* const sync_state =
    "Makes the named tensors bit-identical across the group (block-diff state sync), in place; "
    "a collective. `revision`: this peer's state revision (the number of syncs it has been "
    "through); strategy: 'enforce_popular' (vote; take the majority), 'receive_only' (a joiner) "
    "or 'send_only' (never overwritten). Returns a SyncInfo whose .revision is the new "
    "revision. Raises StateLayoutError when names, dtypes or sizes differ from the group's, "
    "PeerFailure (retry after update_topology()), Timeout.";

const char* const work =
    "One collective in flight. Holds its tensors until done. Deleting a Work that has not "
    "completed cancels its operation (as cancel() does) and then waits for it to end, which is "
    "quick: keep the Work until wait() returns.";

const char* const cancel =
    "Fails the operation unless it has completed (never blocks): wait() then raises "
    "PeerFailure ('cancelled by the caller'). The members in a transfer with this one, and any "
    "that starts the operation later, fail with PeerFailure too; every member then calls "
    "update_topology() before the next collective (which also releases a member waiting for a "
    "third one's part). A no-op once the operation is done.";

const char* const wait =
    "Blocks (GIL released) until the all-reduce completes and returns its result tensor (`out`, "
    "or the tensor itself). With `timeout` (seconds) raises Timeout if not done by then; the "
    "operation goes on and may be waited for again. Raises the operation's error: PeerFailure "
    "(the input is intact; call update_topology() and retry), NodeEvicted, Closed.";

const char* const engine =
    "The sync engine: DiLoCo, Streaming DiLoCo, CO2 and eager outer loops over some of the "
    "trainer's parameters (docs/training.md). Its calls and the communicator's other calls must "
    "not run concurrently.";

const char* const engine_init =
    "Starts the engine over `params` (float32 or bfloat16 CPU tensors, written in place by the "
    "merge and kept alive by the engine): a collective of the group's admitted peers, which "
    "must pass the same options. The group's first start elects one set of global parameters; a "
    "later peer downloads them and the outer state. fragments: F (Streaming DiLoCo when > 1); "
    "sync_every: H; delay: tau; method: 'diloco', 'co2' or 'eager'; quant: the "
    "pseudo-gradients' codec, or 'sparse' (DiLoCo only: the top topk_per_chunk values of every "
    "chunk, with error feedback); pieces: (fragment, range, offset, count) tuples (default: range "
    "i is fragment i mod F); deadline_ms: a round not done this long after its launch is dropped "
    "(this peer's own, 0: none), and with adaptive_deadline the deadline follows the group's "
    "sync times within [1 s, deadline_ms]. Options left None take the library's defaults "
    "(lh_sync_engine_options). "
    "ValueError/Unsupported for bad options, StateLayoutError when another peer's options or "
    "checkpoint differ.";

}  // namespace longhaul::py::doc
