/*
 * longhaul: a fault-tolerant, low-bandwidth collective communication library.
 *
 * This header is the stable C99 ABI. It contains no C++ types; every object is an opaque handle
 * and every fallible call returns an lh_status. A status other than LH_OK is always accompanied by
 * a human-readable message: lh_master_last_error / lh_comm_last_error for calls on a handle, and
 * lh_last_error for the calling thread's last failed call of any kind (the only way to learn why a
 * *_create failed, since no handle exists then).
 *
 * Two kinds of object:
 *   lh_master  the coordinator. Holds no tensor data; tracks who is in, the epoch, and the ring
 *              order of every peer group. One per training run (or run the longhaul-master daemon).
 *   lh_comm    a peer's communicator: its session with the master and its data links to its ring
 *              neighbours. One per peer group a process takes part in.
 *
 * Options are plain structs. Always fill one with its *_init function first and then change the
 * fields you care about: defaults are documented per field, and fields added in later versions
 * get their defaults from *_init, so code written against this version keeps compiling and
 * behaving the same. Strings in options are copied by *_create; the caller keeps ownership.
 *
 * Thread safety: unless a function says otherwise, calls on one handle must not run
 * concurrently. Functions marked "thread-safe" may be called from any thread at any time between
 * create and destroy, concurrently with any other call on the same handle. No handle's *_destroy
 * may run concurrently with any other call on that handle, nor from a longhaul callback.
 *
 * Rules every call follows unless it says otherwise:
 *   - A NULL handle, or a NULL pointer where the call needs one, is refused with
 *     LH_ERR_INVALID_ARGUMENT (the message names the function) and changes nothing.
 *   - Enum values outside the values declared here are refused with LH_ERR_INVALID_ARGUMENT.
 *   - Output parameters are written only on LH_OK, except where a call says otherwise and except
 *     *out of a *_create / *_start, which is NULL after any failure but a NULL argument.
 *   - A failed call records its message on the calling thread (lh_last_error) and, unless it
 *     failed for a NULL argument, on the handle it was called on (that handle's *_last_error).
 *   - Strings the library returns are owned by the library: never free them. lh_status_string and
 *     lh_version return static strings. A *_last_error string is owned by its handle and stays
 *     valid until the next failing call on that handle (from any thread) or its *_destroy; with
 *     concurrent callers, prefer lh_last_error, which is per thread. Passed a NULL handle, a
 *     *_last_error function returns a static string, never NULL.
 */
#ifndef LONGHAUL_LONGHAUL_H_
#define LONGHAUL_LONGHAUL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every error the library can report. Values are part of the ABI and never renumbered. */
typedef enum lh_status {
  LH_OK = 0,
  LH_ERR_INVALID_ARGUMENT = 1, /* bad input from the caller; nothing was changed */
  LH_ERR_PEER_LOST = 2,        /* a remote end closed, reset or went silent; retryable */
  LH_ERR_ABORTED = 3,          /* the operation was aborted (by the master or the caller) */
  LH_ERR_TIMEOUT = 4,          /* a deadline passed */
  LH_ERR_AUTH = 5,             /* authentication failed (wrong secret, TLS failure) */
  LH_ERR_PROTOCOL = 6,         /* the remote end violated the protocol (bad frame, bad version) */
  LH_ERR_IO = 7,               /* an operating-system call failed (bind, connect, file) */
  LH_ERR_UNSUPPORTED = 8,      /* a valid request this build or configuration cannot serve */
  LH_ERR_CLOSED = 9,           /* closed, left, never connected or destroyed (see lh_comm) */
  LH_ERR_STATE_MISMATCH = 10,  /* shared state differs in keys, types, sizes or revision */
  LH_ERR_INTERNAL = 11,        /* a bug in longhaul; please report it */
  /* Another rank of this peer's node died, left or was removed, so the master evicted every rail
   * of the node (nodes join, move and leave as a whole: lh_comm_options.node). The communicator
   * is finished: abort the node's intra-node collectives, end its ranks, and start the node again
   * to rejoin. Not retryable on this communicator. */
  LH_ERR_NODE_EVICTED = 12,
  /* The members called one collective with different arguments (kind, dtype, reduce op, codec,
   * block, schedule, root or counts): the message names the field and the members. Every member
   * fails the operation with it, and its output is left as it was. Not retryable: the calls
   * disagree, fix the program. */
  LH_ERR_MISMATCH = 13
} lh_status;

/* A static, never-NULL English name for a status code ("LH_ERR_PEER_LOST", ...;
 * "LH_ERR_UNKNOWN" for a value not declared above). Thread-safe. */
const char* lh_status_string(lh_status status);

/* The library's version as "MAJOR.MINOR.PATCH"; a static string. Thread-safe. */
const char* lh_version(void);

/* The message of the calling thread's last failed call (any function of this header), or "" if
 * none failed yet. The pointer stays valid until the thread's next failing call. Thread-safe. */
const char* lh_last_error(void);

/* Sets the process-wide log level: "debug", "info", "warn" (the default, unless the LONGHAUL_LOG
 * environment variable says otherwise), "error" or "off". Logs go to stderr. Thread-safe.
 * LH_ERR_INVALID_ARGUMENT for NULL or any other string (the level is then unchanged). */
lh_status lh_set_log_level(const char* level);

/* ------------------------------------------------------------------------------------------ */
/* Master                                                                                      */

typedef struct lh_master lh_master;

typedef struct lh_master_options {
  /* "host:port" to listen on; IPv6 as "[addr]:port"; port 0 picks a free port (read it back
   * with lh_master_port). Default "0.0.0.0:0". */
  const char* listen_address;
  /* Cluster secret every peer must prove (HMAC challenge-response). NULL or "" (the default)
   * disables authentication: only do that on a trusted network. */
  const char* secret;
  /* PEM certificate and key: when both are set, every connection to the master is TLS 1.3.
   * Default NULL (plaintext). */
  const char* tls_cert_file;
  const char* tls_key_file;
  /* Heartbeats in both directions every interval; a peer (or the master, seen from a peer)
   * silent for heartbeat_misses intervals is declared dead. Defaults 1000 ms and 3. */
  uint32_t heartbeat_interval_ms;
  uint32_t heartbeat_misses;
  /* A reconfiguration whose peers have not all set up their links after this long evicts the ones
   * that have not. Default 30000 ms. */
  uint32_t topology_timeout_ms;
  /* A connection must complete its handshake (and register) within this. Default 5000 ms. */
  uint32_t handshake_timeout_ms;
  /* Threads serving the network. 0 (the default) picks 2. */
  uint32_t io_threads;
  /* A file where the master keeps its journal (a few dozen bytes, rewritten atomically and
   * fsynced once per 1024 peer ids or epochs), or NULL (the default) for none. A master started
   * on a journal an earlier master left recovers that run: for a window of
   * max(2 s, heartbeat_interval_ms x heartbeat_misses) its peers rejoin with their view of the
   * run, then every group is re-formed in a newer epoch, and new peer ids continue above the
   * earlier master's. A corrupt journal is logged and replaced, never fatal. Without a journal
   * a restarted master still recovers from the peers' reports, but a newcomer registering before
   * they are back may take one's id (that peer is then removed). See docs/operations.md,
   * "Restarting the master". */
  const char* journal_path;
} lh_master_options;

/* Fills *options with the defaults above (the strings it sets are static). NULL is ignored. */
void lh_master_options_init(lh_master_options* options);

/* Creates a master and binds its listen address (it accepts nobody until lh_master_run).
 * On success *out owns a new handle (release it with lh_master_destroy); on failure *out is NULL
 * and lh_last_error says why:
 *   LH_ERR_INVALID_ARGUMENT  `options` or `out` NULL; listen_address not "host:port"; only one of
 *                            tls_cert_file and tls_key_file set (TLS needs both); a zero
 *                            handshake_timeout_ms; unreadable TLS files.
 *   LH_ERR_IO                the listen address cannot be bound.
 * The strings in *options are copied. */
lh_status lh_master_create(const lh_master_options* options, lh_master** out);

/* Starts serving peers on background threads and returns at once. LH_ERR_CLOSED after
 * lh_master_stop (a stopped master does not restart); calling it twice is harmless. */
lh_status lh_master_run(lh_master* master);

/* The port the master listens on (useful after asking for port 0). Thread-safe. */
lh_status lh_master_port(const lh_master* master, uint16_t* port);

/* Disconnects every peer (they see LH_ERR_PEER_LOST) and stops accepting; blocks until done.
 * Idempotent. Must not be called from a longhaul callback. */
lh_status lh_master_stop(lh_master* master);

/* Stops the master if needed (blocking, as lh_master_stop) and frees it. NULL is ignored. */
void lh_master_destroy(lh_master* master);

/* The message of the last failed call on this master, or "". Owned by the master: valid until
 * its next failing call or lh_master_destroy. */
const char* lh_master_last_error(const lh_master* master);

/* ------------------------------------------------------------------------------------------ */
/* Communicator                                                                                */

typedef struct lh_comm lh_comm;

typedef struct lh_comm_options {
  /* The master's "host:port". Required (default NULL). */
  const char* master_address;
  /* The peer group to reduce with, e.g. one per FSDP shard. Membership and epochs are global,
   * rings are per group. Default 0. */
  uint32_t peer_group;
  /* TCP connections per data link to each ring neighbour; large payloads are striped over them.
   * 1..64, default 1. */
  uint32_t connections_per_link;
  /* Cluster secret; must match the master's. Default NULL (none). */
  const char* secret;
  /* Nonzero: every connection (to the master and between peers) uses TLS 1.3. Peers accept
   * their neighbours' links, so tls_cert_file and tls_key_file are then required. tls_ca_file, if
   * set, verifies the certificates of the master and the neighbours; without it the channel is
   * encrypted and the secret authenticates both ends. Default 0. */
  int use_tls;
  const char* tls_cert_file;
  const char* tls_key_file;
  const char* tls_ca_file;
  /* Where to listen for the neighbours' data links. Default "0.0.0.0:0" (all interfaces, a free
   * port). */
  const char* listen_address;
  /* What other peers connect to: "host:port" (e.g. a NAT port forward), "host" (with the
   * listening port), or NULL (the default: the address the master sees this peer connect from,
   * with the listening port). */
  const char* advertised_address;
  /* lh_comm_connect gives up after this long without admission. Default 30000 ms. */
  uint32_t connect_timeout_ms;
  /* Time to set up the links to the ring neighbours of a new epoch; a neighbour not linked by
   * then is reported unreachable and the master picks a ring without that pair. Default 10000. */
  uint32_t link_timeout_ms;
  /* Per-connection handshake deadline. Default 5000 ms. */
  uint32_t handshake_timeout_ms;
  /* Threads serving the network. 0 (the default) picks 2. */
  uint32_t io_threads;
  /* Nonzero: link to every member of the group instead of only the two ring neighbours, which
   * the direct all-reduce schedule needs (LH_SCHEDULE_DIRECT; LH_SCHEDULE_AUTO uses it for
   * quantized all-reduces when this is set). Every member of a group must use the same value.
   * Costs N-1 links per peer. Default 0. */
  int full_mesh;
  /* A state sync (lh_state_sync) drops a source that delivers nothing for this long and asks the
   * other sources for its blocks; with no source left the sync fails with LH_ERR_TIMEOUT.
   * 0 (the default): the environment's LONGHAUL_STATE_STALL_TIMEOUT_MS if set, else 30000. */
  uint32_t state_stall_timeout_ms;
  /* The node (machine) this rank belongs to, and its rail: rank `node_rail` of the node's
   * `node_rails` ranks, one per GPU or local process. The master admits a node only once all its
   * rails have registered, moves them into every epoch together, and when any of them dies, is
   * declared dead or is removed it evicts the others, whose calls then fail (and whose abort
   * callback runs) with LH_ERR_NODE_EVICTED. Rails of one node must be in different peer groups
   * (typically peer_group = node_rail), and every rail must name the same node and node_rails.
   * node NULL or "" is a node of one rail (node_rail 0, node_rails 1), as in earlier versions.
   * Defaults, from the launcher's environment when LOCAL_WORLD_SIZE and LOCAL_RANK are set (as
   * torchrun sets them): node = GROUP_RANK (or, if that is unset, the host name), node_rail =
   * LOCAL_RANK, node_rails = LOCAL_WORLD_SIZE, and peer_group = LOCAL_RANK. Otherwise NULL, 0, 1
   * (and peer_group 0). node is at most 255 bytes. */
  const char* node;
  uint32_t node_rail;
  uint32_t node_rails;
  /* When the connection to the master breaks after lh_comm_connect succeeded (the master crashed
   * or is restarting), the communicator keeps its epoch, ring and data links, lets the operations
   * in flight run to their end, refuses new ones with LH_ERR_ABORTED (retryable: call
   * lh_comm_update_topology, which waits for the master, and retry), and reconnects with backoff
   * for up to this long; then it
   * rejoins the master, which re-forms the ring. Not back in time: LH_ERR_PEER_LOST. 0 ends the
   * communicator at once when the master is lost. Default 60000. */
  uint32_t master_reconnect_timeout_ms;
  /* Upload cap of each data link in Mbit/s, split evenly over its connections_per_link
   * connections (the kernel paces each one, SO_MAX_PACING_RATE). For a peer on a home connection
   * whose uplink is slower than its paths: set it a little below the uplink's rate so the K
   * connections do not fill the modem's buffer and delay the peer's heartbeats behind seconds of
   * data. Each link has its own cap (a ring peer sends on one link at a time). 0 (the default):
   * no cap. */
  uint32_t link_upload_mbit;
  /* lh_comm_connect returns only once this communicator's peer group (LH_ATTR_GROUP_WORLD_SIZE)
   * has at least this many members, admitting the peers that join meanwhile (it calls
   * lh_comm_update_topology for them, as lh_comm_wait_for_peers does): a program that starts its
   * peers one by one sets it to the group's size, so the first one does not run its collectives
   * alone. The wait shares connect_timeout_ms with the admission. Every member of the group should
   * set the same value. Only the start waits: a group that later shrinks below min_peers (a peer
   * died or left) keeps working with fewer members; call lh_comm_wait_for_peers to wait again.
   * 0 and 1 (0 is the default): no wait beyond admission. At most 65536. */
  uint32_t min_peers;
  /* TCP congestion control of the data connections (setsockopt TCP_CONGESTION; docs/transport.md,
   * "Socket tuning"). "auto" or NULL (the default): BBR where the kernel offers it to this process,
   * else the system's algorithm (said once in the log): Linux restarts a loss-based algorithm's
   * window after one RTO of silence, so a DiLoCo sync after seconds of compute would climb out
   * of slow start again, which BBR is spared. "system": never changed. Any other name: that
   * algorithm, or every connection fails with the kernel's error (LH_ERR_IO naming it). At most
   * 15 bytes. */
  const char* tcp_congestion;
} lh_comm_options;

/* Fills *options with the defaults above (the strings it sets are static). NULL is ignored. */
void lh_comm_options_init(lh_comm_options* options);

/* Creates a communicator, binds its data listener and starts its threads (io_threads for the
 * network, one worker pool sized to the machine); it does not contact the master yet. On success
 * *out owns a new handle: release it with lh_comm_destroy. On failure *out is NULL and
 * lh_last_error says why:
 *   LH_ERR_INVALID_ARGUMENT  `options` or `out` NULL; master_address NULL, "", not "host:port"
 *                            or with port 0; connections_per_link outside 1..64; a zero
 *                            handshake_timeout_ms, connect_timeout_ms or link_timeout_ms; a
 *                            listen_address or advertised_address that does not parse; use_tls
 *                            without both tls_cert_file and tls_key_file; node_rails outside
 *                            1..1024, node_rail >= node_rails, node_rails > 1 without a node,
 *                            a node longer than 255 bytes.
 *   LH_ERR_IO (or the TLS layer's error)  the listen address cannot be bound, a TLS file cannot
 *                            be read.
 * The strings in *options are copied. */
lh_status lh_comm_create(const lh_comm_options* options, lh_comm** out);

/* Connects to the master, registers, and blocks until admitted into an epoch: at once if it is
 * the first peer, otherwise when every admitted peer has reached lh_comm_update_topology. A rank
 * of a node (lh_comm_options.node) is admitted only together with all its node's rails, so it
 * waits until every one of them has registered too. With lh_comm_options.min_peers > 1 it then
 * waits, as lh_comm_wait_for_peers(comm, min_peers, ...) does, until the group has that many
 * members, within what is left of connect_timeout_ms.
 * LH_ERR_TIMEOUT after connect_timeout_ms (for a rank of an incomplete node the message names
 * the rails still missing; when admitted but the group is still smaller than min_peers, the
 * message says "the group has M of the N members min_peers asks for", and the communicator stays
 * admitted and usable: wait again, go on with fewer, or leave); LH_ERR_AUTH for a wrong secret;
 * LH_ERR_PROTOCOL for an incompatible master; LH_ERR_PEER_LOST if the master is unreachable;
 * LH_ERR_INVALID_ARGUMENT with the master's reason when the node claim is refused (another machine
 * already uses the node's identity, the rail counts of its ranks disagree, the rail is registered
 * already, or two rails share a peer group), or when called a second time; LH_ERR_NODE_EVICTED if
 * another rail of the node died first; LH_ERR_CLOSED after lh_comm_leave or lh_comm_destroy. On
 * any other failure the communicator is unusable (destroy it). Call once. */
lh_status lh_comm_connect(lh_comm* comm);

/* Blocks until this communicator's peer group (LH_ATTR_GROUP_WORLD_SIZE) has at least `n` members,
 * or `timeout_ms` milliseconds have passed. Meanwhile it admits the peers waiting to join: each
 * time the master reports one (lh_comm_are_peers_pending), it calls lh_comm_update_topology,
 * which waits until every admitted member has reached lh_comm_update_topology too (so the other
 * members must be in this call, in their own training loop's update_topology, or in a
 * collective the re-formation aborts). The deadline is checked between re-formations: one in
 * progress is waited for. Returns LH_OK at once when the group already has n members (n 0 or 1:
 * always). Errors: LH_ERR_TIMEOUT when the deadline passed first (timeout_ms 0: at once), with
 * "the group has M of the N members ..." in the message; the communicator stays usable.
 * LH_ERR_CLOSED before lh_comm_connect succeeded, after lh_comm_leave or lh_comm_destroy;
 * LH_ERR_INVALID_ARGUMENT for n above 65536; lh_comm_update_topology's errors (which end the
 * communicator). Not thread-safe: no other call on the communicator may run meanwhile. */
lh_status lh_comm_wait_for_peers(lh_comm* comm, uint32_t n, uint32_t timeout_ms);

/* The reconfiguration point of a training loop. Returns at once (LH_OK) if nothing needs to
 * change; otherwise blocks until every admitted peer has called it, then waiting peers are
 * admitted, lost peers removed, links to the new ring neighbours set up, and every peer enters
 * the same new epoch together. It waits as long as other peers take to arrive, but never on a
 * dead one: a peer that dies is detected (socket error or missed heartbeats) and dropped.
 * LH_ERR_PEER_LOST if the master is lost; LH_ERR_NODE_EVICTED if another rail of this peer's
 * node is gone (or its node is leaving); LH_ERR_* with the master's reason if it removed this
 * peer. Any failure ends the communicator. */
lh_status lh_comm_update_topology(lh_comm* comm);

/* *pending = 1 if lh_comm_update_topology has work to do (a peer waits to join, or a peer or link
 * was lost since this epoch began, or this communicator has failed and update_topology will
 * report why), else 0. Costs no network round trip: the master pushes the flag. Thread-safe. */
lh_status lh_comm_are_peers_pending(lh_comm* comm, int* pending);

typedef enum lh_attribute {
  LH_ATTR_WORLD_SIZE = 1,       /* peers in the current epoch, all groups */
  LH_ATTR_GROUP_WORLD_SIZE = 2, /* peers in this communicator's group */
  LH_ATTR_RANK = 3,             /* this peer's position in its group's ring, 0-based */
  LH_ATTR_EPOCH = 4,            /* the current epoch; 0 before admission; grows with every change */
  LH_ATTR_GROUP_COUNT = 5,      /* number of peer groups with at least one peer */
  LH_ATTR_PEER_ID = 6,          /* this peer's id, unique in the run (ids grow in join order) */
  LH_ATTR_ABORT_COUNT = 7,      /* aborts the master pushed to this peer so far */
  LH_ATTR_LISTEN_PORT = 8       /* the port the data listener is bound to (known from create on:
                                 * e.g. to set up a port forward for advertised_address) */
} lh_attribute;

/* Reads an attribute of the current epoch into *value. Thread-safe. LH_ERR_INVALID_ARGUMENT for
 * an unknown attribute. */
lh_status lh_comm_get_attribute(lh_comm* comm, lh_attribute attribute, int64_t* value);

/* Copies the peer ids of this group's ring, in ring order, into ids[0..capacity) and sets *count
 * to the ring's size (which may exceed capacity: call again with a larger buffer). `ids` may be
 * NULL when capacity is 0 (to learn the size). Empty before admission. Thread-safe. */
lh_status lh_comm_get_ring(lh_comm* comm, uint64_t* ids, size_t capacity, size_t* count);

/* Bytes this communicator has sent and received, as counted at its sockets: every frame its
 * links wrote or read, the 32-byte frame header with its payload (with TLS: the plaintext frames
 * handed to the TLS layer, so record overhead and TLS handshakes are not in it; the connection
 * handshake that precedes a link is not counted either). Separately by kind of link: */
typedef struct lh_traffic {
  /* The data links to the group's members: the collectives' segments and the links' own
   * messages (hellos, cancels). */
  uint64_t data_sent;
  uint64_t data_received;
  /* The connection to the master: registration, heartbeats, topology rounds, batch decisions, and
   * a state sync's hash reports and plan. */
  uint64_t control_sent;
  uint64_t control_received;
  /* The state sync's links to and from other peers: blocks this peer served or fetched, and the
   * requests for them. */
  uint64_t state_sent;
  uint64_t state_received;
} lh_traffic;

/* Fills *traffic with the byte counts since lh_comm_create. Each field only grows: it covers the
 * communicator's whole life, links that have closed included (a new epoch may replace links).
 * A frame counts once written or read in full; the six fields are read one after another, not
 * as one snapshot of a single moment. Thread-safe; costs no network round trip.
 * LH_ERR_INVALID_ARGUMENT when comm or traffic is NULL. */
lh_status lh_comm_get_traffic(lh_comm* comm, lh_traffic* traffic);

/* Called (on a library thread; must not block or call back into the communicator) when the master
 * aborts the in-flight operations of this peer's group: because a peer or link was lost (status
 * LH_ERR_PEER_LOST), or because a member is waiting in lh_comm_update_topology to re-form the ring
 * for a joiner (status LH_ERR_ABORTED); and once more if the communicator fails (the master is
 * lost, or it removed this peer: LH_ERR_NODE_EVICTED when another rail of this peer's node died, so
 * a trainer can abort its intra-node collectives instead of hanging in them); not for lh_comm_leave
 * or lh_comm_destroy. `reason` is valid during the call
 * only. Set it before lh_comm_connect; a NULL callback removes it, a new one replaces the old (a
 * call of the old one already under way may still finish). Once lh_comm_destroy returns, the
 * callback is not running and is not called again. */
typedef void (*lh_abort_callback)(void* user_data, uint64_t epoch, lh_status status,
                                  const char* reason);
lh_status lh_comm_set_abort_callback(lh_comm* comm, lh_abort_callback callback, void* user_data);

/* Leaves gracefully: tells the master (which logs `reason`, may be NULL) and closes every link.
 * The other peers re-form their ring at their next lh_comm_update_topology. The communicator is
 * then of no further use but lh_comm_destroy: see "Closed, unconnected and destroyed
 * communicators" below. Leaving twice is harmless (LH_OK). */
lh_status lh_comm_leave(lh_comm* comm, const char* reason);

/* Frees the communicator's services. Without a prior lh_comm_leave this is an abrupt leave: the
 * master notices the closed connection. All-reduces still in flight fail with LH_ERR_CLOSED and
 * are waited for; their lh_op handles stay valid (wait on or destroy them later). Destroy every
 * lh_sync_engine and lh_local_group started on it first. NULL is ignored; destroying a destroyed
 * communicator again is ignored too. */
void lh_comm_destroy(lh_comm* comm);

/* Closed, unconnected and destroyed communicators. Every call that communicates fails with
 * LH_ERR_CLOSED, sends nothing and writes no buffer, on a communicator that
 *   - was never connected (lh_comm_connect not called, or still running on another thread),
 *   - has left (lh_comm_leave), or
 *   - was destroyed (lh_comm_destroy; see below).
 * Those calls: lh_comm_update_topology, lh_comm_wait_for_peers, every collective (lh_allreduce,
 * lh_reduce_scatter, lh_allgather, lh_broadcast, lh_barrier, lh_sparse_allgather, their _async
 * forms, lh_allreduce_batch), lh_sync_state and lh_sync_engine_start. A communicator whose session
 * failed (the master removed it, was lost for good, its node was evicted) reports that failure
 * instead (LH_ERR_PEER_LOST, LH_ERR_NODE_EVICTED, ...). The queries (lh_comm_get_attribute,
 * lh_comm_get_ring, lh_comm_get_traffic, lh_comm_are_peers_pending, lh_comm_last_error) keep
 * answering on a left or unconnected communicator (a group of one before admission).
 *
 * Use after lh_comm_destroy: each lh_comm carries a generation (the how-many-th communicator of
 * the process it is), and lh_comm_destroy frees its services but keeps the handle itself as a
 * small tombstone (about 100 bytes, never freed or reused), so every later call on that pointer
 * is detected: the calls that return an lh_status return LH_ERR_CLOSED ("communicator #G was
 * destroyed"), lh_comm_last_error returns that message, lh_comm_destroy and
 * lh_comm_set_abort_callback do nothing (the latter returns LH_ERR_CLOSED). Not detected (the C
 * language gives no way to): a pointer lh_comm_create never returned, a call that runs
 * concurrently with lh_comm_destroy (forbidden above), and a use after destroy of the other
 * handles (lh_op, lh_state, lh_sync_engine, lh_local_group, lh_master), which are freed. */

/* The message of the last failed call on this communicator, or "". Owned by the communicator:
 * valid until its next failing call (from any thread) or lh_comm_destroy. */
const char* lh_comm_last_error(const lh_comm* comm);

/* ------------------------------------------------------------------------------------------ */
/* Secrets                                                                                     */

/* The most bytes a secret file may hold (after the line ending is removed). */
#define LH_SECRET_MAX_BYTES 4096
/* The fewest bytes a secret may have unless allow_weak (128 bits if random). */
#define LH_SECRET_MIN_BYTES 16

/* Reads the cluster secret from the file at `path` with the rules the longhaul-master daemon's
 * --secret-file applies (it calls this function), so one file authenticates the master and the
 * peers alike:
 *   - the secret is the file's bytes with one line ending removed from the end, if there is one:
 *     a final "\r\n" or else a final "\n"; nothing else is removed (spaces stay; "s\n\n" gives
 *     "s\n"). `echo "$(openssl rand -hex 32)" > secret` and `openssl rand -hex 32 > secret` both
 *     give the 64 hex digits.
 *   - the file must not be readable, writable or executable by its group or others (chmod 600),
 *     unless allow_weak is nonzero;
 *   - the secret must have at least LH_SECRET_MIN_BYTES bytes, unless allow_weak is nonzero; it is
 *     never empty, holds no NUL byte, and has at most LH_SECRET_MAX_BYTES bytes.
 * On LH_OK, secret[0..*length) holds it followed by a NUL (pass `secret` as lh_comm_options.secret
 * or lh_master_options.secret). `secret` must have room for *length + 1 bytes: a buffer of
 * LH_SECRET_MAX_BYTES + 1 always fits. Errors: LH_ERR_INVALID_ARGUMENT for NULL arguments, a file
 * its group or others may access, a secret too short, empty, too long or holding a NUL byte, and a
 * buffer too small (then *length is set to the secret's length, the buffer is untouched);
 * LH_ERR_IO when the file cannot be read. The message (lh_last_error) says how to fix it.
 * Thread-safe. */
lh_status lh_secret_from_file(const char* path, int allow_weak, char* secret, size_t capacity,
                              size_t* length);

/* ------------------------------------------------------------------------------------------ */
/* Collectives                                                                                 */

/* Element types. Values are part of the ABI. */
typedef enum lh_dtype {
  LH_DTYPE_F32 = 0,
  LH_DTYPE_F64 = 1,
  LH_DTYPE_F16 = 2, /* IEEE 754 binary16 */
  LH_DTYPE_BF16 = 3,
  LH_DTYPE_I8 = 4,
  LH_DTYPE_U8 = 5,
  LH_DTYPE_I32 = 6,
  LH_DTYPE_U32 = 7,
  LH_DTYPE_I64 = 8,
  LH_DTYPE_U64 = 9
} lh_dtype;

/* Reductions. Integers wrap around; LH_OP_AVG on integers truncates toward zero; f16/bf16 combine
 * in f32 and round to nearest-even. Sums and averages round once per combining step: at every hop
 * of the ring schedule (partial sums travel as f16/bf16), once in all for the direct schedule
 * (the chunk's owner adds every contribution in f32), and an average divides before it rounds. */
typedef enum lh_reduce_op {
  LH_OP_SUM = 0,
  LH_OP_AVG = 1,
  LH_OP_MIN = 2,
  LH_OP_MAX = 3,
  LH_OP_PROD = 4
} lh_reduce_op;

/* Wire encodings of an all-reduce. Quantizing codecs need LH_DTYPE_F32 data. LH_CODEC_U8/U4 are
 * min-max blockwise (a scale and an offset per block of `block` elements). LH_CODEC_E3M0 is the
 * 4-bit float of Streaming DiLoCo: per block of `block` elements an f32 scale A = max |x|, then
 * per element a sign and a 3-bit exponent: 0 or +-A * 2^-k, k = 0..6, rounded to the nearest
 * level (0.53 bytes/element at block 128; docs/quantization.md). Every quantized contribution is
 * decoded and summed in f32. LH_CODEC_SPARSE is the sync engine's only (lh_sync_engine_options:
 * the top-k of each chunk, 2 bits a value, with error feedback, through the sparse all-gather;
 * docs/training.md); an all-reduce refuses it (LH_ERR_INVALID_ARGUMENT). */
typedef enum lh_codec {
  LH_CODEC_NONE = 0,
  LH_CODEC_FP16 = 1,
  LH_CODEC_BF16 = 2,
  LH_CODEC_U8 = 3,
  LH_CODEC_U4 = 4,
  LH_CODEC_E3M0 = 5,
  LH_CODEC_SPARSE = 6
} lh_codec;

/* LH_SCHEDULE_RING: reduce-scatter and all-gather around the ring, N-1 steps each.
 * LH_SCHEDULE_DIRECT: each chunk goes straight to its owner (one step; each quantized contribution
 * encoded once); needs lh_comm_options.full_mesh at every group size. LH_SCHEDULE_AUTO: direct for
 * quantized all-reduces when lh_comm_options.full_mesh is set and the group has at most 16 peers,
 * else ring. A member without a link its schedule needs (one was lost) fails the operation with
 * LH_ERR_PEER_LOST, and the members that started it fail at once. */
typedef enum lh_schedule {
  LH_SCHEDULE_AUTO = 0,
  LH_SCHEDULE_RING = 1,
  LH_SCHEDULE_DIRECT = 2
} lh_schedule;

/* Where a collective's buffers live. LH_MEMORY_AUTO asks the CUDA runtime about each pointer (one
 * query per buffer per call; every pointer is host memory in a build without the GPU layer or on a
 * machine without a CUDA device). LH_MEMORY_CUDA declares them device memory: a collective then
 * copies its input across PCIe into a pinned host slot (from a pool kept between calls), runs
 * there, and copies the result back to the output; the bytes on the wire and the result are those
 * of a host collective, bit for bit. An all-reduce or a reduce-scatter copies its input segment by
 * segment while the first segments are already on the wire. An in-place all-reduce (restore_input
 * set, the default) copies the result back once it has succeeded, so a failure leaves the
 * caller's buffer untouched; out of place, or with restore_input == 0, each segment of the result
 * is copied back as soon as it is final, overlapped with the network, and after a failure `recv`
 * holds unspecified values (as with host memory). The caller must have finished writing the input
 * before the call (its stream synchronised, or its work on the legacy default stream, which the
 * copies are ordered after). Device memory is taken by every collective (lh_allreduce,
 * lh_reduce_scatter, lh_allgather, lh_broadcast, their _async forms, lh_allreduce_batch: an item's
 * device result is copied back once the whole batch has succeeded), by lh_state_add_tensor and by
 * the sync engine's ranges; a machine without a usable CUDA device refuses it with
 * LH_ERR_UNSUPPORTED ("no CUDA device:
 * ..."). The error-feedback residual must be host memory. docs/gpu.md has the details and
 * figures. */
typedef enum lh_memory { LH_MEMORY_AUTO = 0, LH_MEMORY_HOST = 1, LH_MEMORY_CUDA = 2 } lh_memory;

typedef struct lh_allreduce_options {
  lh_codec codec;       /* default LH_CODEC_NONE */
  uint32_t block;       /* elements per quantization block; default 128 */
  lh_schedule schedule; /* default LH_SCHEDULE_AUTO */
  /* Error feedback (quantizing codecs only): `count` floats carried from call to call; the
   * quantization error of this peer's contribution is kept here and added to the next call's
   * input. Zero-initialise before the first call. Default NULL (off). */
  float* residual;
  uint32_t segment_bytes; /* pipeline granularity; default 1 MiB */
  /* In-place operations only (send == recv). Nonzero (the default): the buffer is given back
   * intact when the operation fails, from a copy of each segment taken before it is overwritten
   * (one streaming copy of the buffer per operation, and as much pooled scratch memory). 0: a
   * failed in-place operation leaves the buffer unspecified, as gloo and NCCL do; for callers that
   * never retry with the same input (they recompute it, or skip the step). lh_allreduce_batch
   * ignores it: the batch keeps its own copy of the inputs and always restores them. */
  int restore_input;
  lh_memory memory; /* where send and recv live; default LH_MEMORY_AUTO (above) */
  /* 0 (the default): none. Else the operation fails with LH_ERR_TIMEOUT on this peer when it has
   * not finished timeout_ms after it started here. Failing it cancels its transfers at both ends:
   * a peer that starts it later fails at once with LH_ERR_ABORTED, one in it when its next
   * transfer is with this peer; one waiting for a peer that never came is released by its own
   * timeout, so give every peer the same (docs/api.md, "Mistakes longhaul catches"). Then, as
   * after any failure: lh_comm_update_topology and retry. The settled calls (lh_allreduce,
   * lh_allreduce_batch) report the failure to the master like any other. */
  uint32_t timeout_ms;
} lh_allreduce_options;

/* Fills *options with the defaults above. NULL is ignored. */
void lh_allreduce_options_init(lh_allreduce_options* options);

/* The rules an all-reduce's arguments must meet (lh_allreduce_async, lh_allreduce and
 * lh_allreduce_batch check them before anything is sent):
 *   - count > 0 needs non-NULL send and recv; send and recv are the same buffer or do not
 *     overlap at all (LH_ERR_INVALID_ARGUMENT).
 *   - A codec other than LH_CODEC_NONE needs LH_DTYPE_F32 data (LH_ERR_UNSUPPORTED); with
 *     LH_CODEC_U8, U4 or E3M0, block is 1..2^30 (LH_ERR_INVALID_ARGUMENT).
 *   - A residual needs a codec other than LH_CODEC_NONE (LH_ERR_INVALID_ARGUMENT).
 *   - segment_bytes is at least one element's size (LH_ERR_INVALID_ARGUMENT).
 *   - LH_SCHEDULE_DIRECT needs lh_comm_options.full_mesh (LH_ERR_UNSUPPORTED), at every group
 *     size: a group of 2 or 3, whose ring links happen to reach every member, refuses it too, so
 *     a program tested small does not break when a fourth peer joins (docs/collectives.md).
 *   - A group has at most 256 members (LH_ERR_UNSUPPORTED). */

/* One collective operation in flight. */
typedef struct lh_op lh_op;

typedef struct lh_op_info {
  uint64_t bytes_sent;     /* payload bytes this peer sent */
  uint64_t bytes_received; /* payload bytes this peer received */
  uint32_t world_size;     /* peers the operation ran with */
  lh_schedule schedule;    /* the schedule it used (ring or direct) */
} lh_op_info;

/* Starts an all-reduce of `count` elements over the peer group's current ring and returns at once.
 * `send` and `recv` may be the same buffer (in place); otherwise they must not overlap. Both must
 * stay valid and untouched until lh_op_wait/lh_op_test reports completion.
 *
 * Every peer of the group must start the group's collectives in the same order within an epoch.
 * Many operations may be in flight at once; each completes or fails on its own. On failure
 * (LH_ERR_PEER_LOST when a peer or link was lost, LH_ERR_ABORTED when the master or a peer ended
 * the operation) `send` is intact (an in-place operation is restored), the residual too, and
 * `recv` holds unspecified values: call lh_comm_update_topology and retry. (An in-place operation
 * with options->restore_input == 0 leaves `send` unspecified too.) Invalid arguments are
 * reported here (LH_ERR_INVALID_ARGUMENT, LH_ERR_UNSUPPORTED) and nothing is sent. `options` may
 * be NULL for the defaults. On success *out owns a new operation: release it with lh_op_destroy
 * (which waits for it). On failure *out is NULL and the message is in lh_comm_last_error and
 * lh_last_error. Thread-safe with respect to other collectives on the same communicator, but not
 * to lh_comm_update_topology. Its outcome is this peer's own: an abort that races its completion
 * can end it OK on some peers and failed on others; lh_allreduce and lh_allreduce_batch settle
 * the outcome with the group. */
lh_status lh_allreduce_async(lh_comm* comm, const void* send, void* recv, size_t count,
                             lh_dtype dtype, lh_reduce_op op, const lh_allreduce_options* options,
                             lh_op** out);

/* Runs an all-reduce and blocks until the group has decided its outcome: every peer reports its
 * own outcome to the master, which decides for the group (as for lh_allreduce_batch, one attempt),
 * so lh_allreduce returns LH_OK on a peer exactly when it returns LH_OK on every peer of the
 * group, all with bit-identical results. On failure `send` is intact (an in-place buffer is
 * restored, unless options->restore_input == 0) and the residual too, also on a peer whose own
 * all-reduce had succeeded (it then returns LH_ERR_ABORTED); call lh_comm_update_topology and
 * retry. The failure message is in lh_comm_last_error and lh_last_error. Costs one round trip to
 * the master per call (in a group of one, none). `info` may be NULL; it is filled once the
 * operation started, whether it then succeeded or failed. Thread-safe as lh_allreduce_async
 * (calls from several threads are decided in the order they started), but must not run beside
 * lh_allreduce_batch, a settled lh_sparse_allgather or a sync engine on the same communicator. */
lh_status lh_allreduce(lh_comm* comm, const void* send, void* recv, size_t count, lh_dtype dtype,
                       lh_reduce_op op, const lh_allreduce_options* options, lh_op_info* info);

/* *done = 1 once the operation has completed (its status is then what lh_op_wait returns), else
 * 0. Never blocks. Thread-safe. */
lh_status lh_op_test(lh_op* op, int* done);

/* Blocks until the operation completes and returns its outcome (the errors of
 * lh_allreduce_async); the failure message is then in lh_op_last_error and the calling thread's
 * lh_last_error. Thread-safe: any thread may wait, any number of times, several at once; every
 * wait returns the same outcome. */
lh_status lh_op_wait(lh_op* op);

/* Byte counts, the world size and the schedule of the operation (final once it has completed).
 * Thread-safe. */
lh_status lh_op_get_info(const lh_op* op, lh_op_info* info);

/* The operation's failure message, or "" (also for a NULL op). Owned by the operation: valid
 * until the next lh_op_wait on it returns or lh_op_destroy. */
const char* lh_op_last_error(const lh_op* op);

/* Cancels the operation: unless it has completed already (then a no-op), it fails with
 * LH_ERR_ABORTED ("cancelled by the caller"), as a failure would end it: its transfers are
 * cancelled at both ends, so a member in a transfer with this one fails at once, and one that
 * starts the operation later too (LH_ERR_ABORTED); a member waiting for a third member's part is
 * released when this one calls lh_comm_update_topology (the master aborts the group's collectives
 * when a member waits there), which the group then re-forms at. Returns at once; the operation
 * completes soon after (lh_op_wait then returns its outcome, LH_OK where it had finished first),
 * and its buffers are in use until then. LH_ERR_INVALID_ARGUMENT for NULL. Thread-safe, also beside
 * lh_op_wait on another thread; any number of times. */
lh_status lh_op_cancel(lh_op* op);

/* Waits for the operation if it still runs (the buffers are in use until then), then frees it.
 * NULL is ignored. No other call on the op may run concurrently with it. */
void lh_op_destroy(lh_op* op);

/* Runs `count` all-reduces (ops[i] of buffers sends[i] -> recvs[i] with counts[i] elements, all of
 * `dtype`, `op` and `options`) as one batch, all in flight at once, all or nothing for the whole
 * group: it returns LH_OK on this peer exactly when it returns LH_OK on every peer of the group,
 * and then every recvs[i] holds its result. After each attempt every peer reports its outcome to
 * the master, which decides for the group (docs/collectives.md); when the attempt failed anywhere
 * (a peer lost or leaving, an abort), every peer restores its sends (and the error-feedback
 * residual), calls lh_comm_update_topology itself, admitting no new peer (they are admitted at
 * the caller's next lh_comm_update_topology), and retries on the new ring, up to `max_attempts`
 * attempts in total. On failure the sends and the residual hold what they held on entry, recvs
 * are unspecified: LH_ERR_PEER_LOST / LH_ERR_ABORTED after the last attempt (call
 * lh_comm_update_topology and retry), or another error. A decision not received within 10
 * minutes ends the communicator with LH_ERR_TIMEOUT. Every peer of the group must call it with
 * the same shape at the same point of its sequence of collectives.
 *
 * Arguments: count == 0 returns LH_OK at once (nothing is sent); otherwise sends, recvs and
 * counts must not be NULL, `options` (NULL for the defaults) applies to every all-reduce of the
 * batch and meets the rules above, an error-feedback residual needs count == 1 (it serves a batch
 * of one), and max_attempts >= 1; all LH_ERR_INVALID_ARGUMENT. options->restore_input is ignored.
 * The failure message is in lh_comm_last_error and lh_last_error. It calls
 * lh_comm_update_topology itself, so nothing else may run on the communicator meanwhile: no
 * other collective, no lh_comm_update_topology, no sync engine. */
lh_status lh_allreduce_batch(lh_comm* comm, const void* const* sends, void* const* recvs,
                             const size_t* counts, size_t count, lh_dtype dtype, lh_reduce_op op,
                             const lh_allreduce_options* options, uint32_t max_attempts);

/* The other collectives: reduce-scatter, all-gather, broadcast and barrier, with the guarantees of
 * an all-reduce: striped over each link's connections, the same types and codecs, bit-identical
 * results on every peer, abortable, and all or nothing for each caller (on failure the send
 * buffer is intact and the receive buffer holds what it held before the call; call
 * lh_comm_update_topology and retry on LH_ERR_PEER_LOST / LH_ERR_ABORTED). They take the same
 * lh_allreduce_options (NULL: the defaults) and meet its rules above; the residual serves only
 * lh_reduce_scatter. LH_SCHEDULE_AUTO picks direct for the gathering ones when full_mesh is set,
 * the group has at most 16 peers and the contributions are alike or small (64 KiB in all): one
 * round trip instead of N-1 ring steps. Counts and roots are by ring position (LH_ATTR_RANK; the
 * ring is lh_comm_get_ring's): every peer of the group must pass the same counts and root, and
 * start the group's collectives (all-reduces included) in the same order within an epoch. Each
 * *_async call returns at once with *out owning a new lh_op (lh_op_wait, lh_op_test,
 * lh_op_get_info, lh_op_destroy as for an all-reduce); its buffers must stay valid and untouched
 * until the operation has completed. The blocking form waits, fills `info` (may be NULL) and
 * frees the operation. On failure the message is in lh_comm_last_error and lh_last_error.
 * Thread-safe as lh_allreduce_async (not with lh_comm_update_topology). */

/* Reduce-scatter: `send` holds the sum of every peer's count (recv_counts[0] elements for the peer
 * at ring position 0, then position 1's, ...); each is reduced with `op` over the group, and this
 * peer receives its own part, recv_count elements, in `recv`. recv_counts: NULL when every peer
 * receives recv_count elements, else group-size entries with recv_counts[rank] == recv_count
 * (LH_ERR_INVALID_ARGUMENT otherwise, and when they do not fit the group). `recv` must not
 * overlap `send`. `recv` is written only once the operation has succeeded. Quantized, the result
 * is the f32 sum of the decoded contributions (each contribution encoded once on the direct
 * schedule, the partial sums re-encoded at every hop on the ring); options->residual, if set,
 * holds one float per element of `send`. */
lh_status lh_reduce_scatter_async(lh_comm* comm, const void* send, void* recv, size_t recv_count,
                                  const size_t* recv_counts, lh_dtype dtype, lh_reduce_op op,
                                  const lh_allreduce_options* options, lh_op** out);
lh_status lh_reduce_scatter(lh_comm* comm, const void* send, void* recv, size_t recv_count,
                            const size_t* recv_counts, lh_dtype dtype, lh_reduce_op op,
                            const lh_allreduce_options* options, lh_op_info* info);

/* All-gather: every peer contributes send_count elements and receives every contribution in
 * `recv`, in ring order (position 0's first). recv_counts: NULL when every peer contributes
 * send_count elements, else group-size entries with recv_counts[rank] == send_count; a count may
 * be 0. `send` may be this peer's own place in `recv` (in place), or apart from it. Quantized
 * (f32), each contribution is encoded once, by its peer, and every peer (that one included)
 * receives the decoding of those same bytes; options->residual must be NULL. With
 * options->restore_input == 0 a failed operation leaves `recv` unspecified instead of as it was
 * (no copy of it is kept). */
lh_status lh_allgather_async(lh_comm* comm, const void* send, size_t send_count, void* recv,
                             const size_t* recv_counts, lh_dtype dtype,
                             const lh_allreduce_options* options, lh_op** out);
lh_status lh_allgather(lh_comm* comm, const void* send, size_t send_count, void* recv,
                       const size_t* recv_counts, lh_dtype dtype,
                       const lh_allreduce_options* options, lh_op_info* info);

/* Broadcast: the `count` elements of `buffer` at the peer at ring position `root` end in `buffer`
 * on every peer (quantized: the root encodes once and every peer, the root included, holds the
 * decoding). The ring schedule pipelines the buffer along the ring, segment by segment; the direct
 * one sends it from the root to every peer (one round trip; auto picks it for up to 64 KiB).
 * LH_ERR_INVALID_ARGUMENT for a root outside the group. On failure `buffer` holds what it held
 * before the call (unless options->restore_input == 0). */
lh_status lh_broadcast_async(lh_comm* comm, void* buffer, size_t count, lh_dtype dtype,
                             uint32_t root, const lh_allreduce_options* options, lh_op** out);
lh_status lh_broadcast(lh_comm* comm, void* buffer, size_t count, lh_dtype dtype, uint32_t root,
                       const lh_allreduce_options* options, lh_op_info* info);

/* Barrier: completes on a peer once every peer of the group has started it. Direct (full_mesh):
 * one message to every peer, about one network round trip; ring: N-1 hops. Only the schedule of
 * `options` is read; a codec other than LH_CODEC_NONE is LH_ERR_INVALID_ARGUMENT. */
lh_status lh_barrier_async(lh_comm* comm, const lh_allreduce_options* options, lh_op** out);
lh_status lh_barrier(lh_comm* comm, const lh_allreduce_options* options, lh_op_info* info);

/* ------------------------------------------------------------------------------------------ */
/* Sparse all-gather                                                                           */

/* An all-gather of byte buffers whose sizes differ from peer to peer and are not declared by the
 * caller: every peer of the group contributes one buffer (`send`, `send_bytes` bytes, 0
 * included), and every peer receives every contribution, in ring order (LH_ATTR_RANK), with its
 * size, bit-identical on every peer. Made for the sparse codec's encodings (docs/quantization.md,
 * "The sparse all-gather"), whose size depends on the data; the bytes are opaque otherwise.
 *
 * It runs as two all-gathers of the group, one after the other, with every guarantee of
 * lh_allgather (striped over each link's connections, the master's abort and a lost peer fail it
 * on every peer within milliseconds, never a hang): first the sizes (8 bytes per peer), then the
 * contributions with those sizes. So it takes two places in the group's order of collectives, and
 * no other collective may be started on the communicator (from another thread) while
 * lh_sparse_allgather_async runs. Wire cost: each peer sends its own contribution to the N-1 others
 * (direct: itself; ring: each contribution passes N-1 hops, each peer forwarding the others'), plus
 * N-1 sizes of 8 bytes; when every contribution is empty only the sizes travel, and a group of
 * one sends nothing.
 *
 * Validation: with options->validate, every contribution (this peer's too) is checked as soon as
 * it has arrived, overlapped with the rest of the transfer. A refused contribution does not fail
 * the transfer: every peer holds the same bytes and runs the same check, so every peer refuses
 * the same peers' contributions, and names them alike (ring position and peer id). The caller
 * leaves them out (the sync engine re-forms the round without them).
 *
 * Ownership of the result: the library allocates it as an lh_sparse_gathered (one buffer holding
 * every contribution back to back); the caller reads it with the lh_sparse_gathered_* functions
 * and frees it with lh_sparse_gathered_destroy. Its pointers stay valid until then. */

typedef enum lh_sparse_validate {
  LH_SPARSE_VALIDATE_NONE = 0, /* every contribution is accepted as it is */
  /* Every non-empty contribution must be a well-formed sparse codec encoding (the checks of the
   * codec's decoder: header, every record, nothing after the last), of `expected_elements`
   * elements when that is set. An empty contribution is accepted (a peer with nothing to send). */
  LH_SPARSE_VALIDATE_CODEC = 1
} lh_sparse_validate;

typedef struct lh_sparse_allgather_options {
  /* Of both all-gathers; default LH_SCHEDULE_AUTO (as lh_allgather: direct with full_mesh and at
   * most 16 peers when the contributions are alike or small, else ring). LH_SCHEDULE_DIRECT needs
   * lh_comm_options.full_mesh (LH_ERR_UNSUPPORTED). */
  lh_schedule schedule;
  uint32_t segment_bytes;      /* pipeline granularity of the contributions; default 1 MiB, >= 1 */
  lh_sparse_validate validate; /* default LH_SPARSE_VALIDATE_NONE */
  /* With LH_SPARSE_VALIDATE_CODEC: the elements every non-empty contribution must encode (its
   * header's count); 0 (the default): any count. */
  uint64_t expected_elements;
  /* The most bytes all contributions together may have; sizes above it fail the call on every
   * peer with LH_ERR_PROTOCOL naming the largest contribution's peer, before any contribution is
   * sent. 0 (the default): no limit but memory. */
  uint64_t max_total_bytes;
  /* The blocking lh_sparse_allgather only (the _async form refuses anything but 0 with
   * LH_ERR_INVALID_ARGUMENT). 0 (the default): the call's outcome is this peer's own, as
   * lh_allgather's. n >= 1: the call is settled with the group through the master as one
   * lh_allreduce_batch is (docs/collectives.md, "Batch all-reduce"): it returns LH_OK on this peer
   * exactly when it does on every peer; a failed attempt is retried over the survivors (re-formed
   * without newcomers) up to n attempts in all. Nothing else may run on the communicator then (no
   * other collective, no lh_comm_update_topology, no sync engine), as for the batch. */
  uint32_t max_attempts;
} lh_sparse_allgather_options;

/* Fills *options with the defaults above. NULL is ignored. */
void lh_sparse_allgather_options_init(lh_sparse_allgather_options* options);

/* Every contribution of one sparse all-gather, owned by the library until
 * lh_sparse_gathered_destroy. */
typedef struct lh_sparse_gathered lh_sparse_gathered;

/* Starts a sparse all-gather of `send` (send_bytes bytes, host memory; NULL only when send_bytes
 * is 0). It waits for the size exchange (about one round trip with direct, N-1 hops on the ring;
 * it ends once every peer has started the call), starts the contributions' all-gather and returns:
 * *out owns the lh_op to wait on (lh_op_wait, lh_op_test, lh_op_get_info: the contributions' bytes;
 * lh_op_destroy), *result owns the result, readable once the operation has completed with LH_OK.
 * `send` must stay valid and unchanged until then. `options` may be NULL for the defaults; every
 * peer must pass the same options. On failure both are NULL (LH_ERR_PEER_LOST / LH_ERR_ABORTED:
 * call lh_comm_update_topology and retry; LH_ERR_INVALID_ARGUMENT, LH_ERR_UNSUPPORTED: bad
 * arguments, nothing sent; LH_ERR_PROTOCOL: the sizes exceed max_total_bytes, on every peer).
 * Refusals of contributions are in the result (lh_sparse_gathered_check), not in the operation's
 * status. Thread-safe as lh_allreduce_async, with the rule above on other collectives meanwhile. */
lh_status lh_sparse_allgather_async(lh_comm* comm, const void* send, size_t send_bytes,
                                    const lh_sparse_allgather_options* options,
                                    lh_sparse_gathered** result, lh_op** out);

/* The blocking form: starts, waits, fills `info` (may be NULL: the bytes of both all-gathers) and
 * returns the outcome. LH_OK: *result owns every contribution. LH_ERR_PROTOCOL from validation:
 * *result is set too (free it), and the message (lh_comm_last_error, lh_last_error) names the
 * first refused peer, its reason and how many were refused. Any other error: *result is NULL. With
 * options->max_attempts >= 1 the outcome is the group's (see lh_sparse_allgather_options). */
lh_status lh_sparse_allgather(lh_comm* comm, const void* send, size_t send_bytes,
                              const lh_sparse_allgather_options* options,
                              lh_sparse_gathered** result, lh_op_info* info);

/* The readers of a result. Before its operation has completed they fail with
 * LH_ERR_INVALID_ARGUMENT ("not completed"), after a failed one with the operation's error; a rank
 * at or above the group's size is LH_ERR_INVALID_ARGUMENT. Thread-safe. */

/* The peers the all-gather ran with (the group's size) and this peer's ring position among them. */
lh_status lh_sparse_gathered_members(const lh_sparse_gathered* result, uint32_t* members,
                                     uint32_t* rank);
/* The contribution of the peer at ring position `rank`: *data points to its *bytes bytes inside
 * the result (valid until lh_sparse_gathered_destroy; not NULL, even for 0 bytes). */
lh_status lh_sparse_gathered_contribution(const lh_sparse_gathered* result, uint32_t rank,
                                          const void** data, size_t* bytes);
/* The peer id at ring position `rank` in the epoch the all-gather ran in (lh_comm_get_ring's). */
lh_status lh_sparse_gathered_peer_id(const lh_sparse_gathered* result, uint32_t rank,
                                     uint64_t* peer_id);
/* LH_OK when the contribution at ring position `rank` was accepted (always, without validation);
 * LH_ERR_PROTOCOL when it was refused, its message (lh_last_error, lh_sparse_gathered_last_error)
 * naming the peer and the reason, e.g. "the contribution of peer 7 at ring position 2 (96 bytes)
 * is malformed: sparse codec: chunk 0: index 9 after 12 (indices must strictly increase)". */
lh_status lh_sparse_gathered_check(const lh_sparse_gathered* result, uint32_t rank);
/* Copies the ring positions of the refused contributions, in ring order, into
 * ranks[0..capacity) and sets *count to how many there are (which may exceed capacity). `ranks`
 * may be NULL when capacity is 0. */
lh_status lh_sparse_gathered_malformed(const lh_sparse_gathered* result, uint32_t* ranks,
                                       size_t capacity, size_t* count);
/* The message of the last failed call on this result, or "" (also for NULL). Owned by the result:
 * valid until its next failing call or lh_sparse_gathered_destroy. */
const char* lh_sparse_gathered_last_error(const lh_sparse_gathered* result);
/* Waits for the operation if it still runs (its buffers are in use until then), then frees the
 * result. NULL is ignored. */
void lh_sparse_gathered_destroy(lh_sparse_gathered* result);

/* ------------------------------------------------------------------------------------------ */
/* Node-local groups                                                                           */

/* The ranks of one node (lh_comm_options.node: the processes of one machine, one per rail) as a
 * group that reduces among itself through shared memory, for the hierarchical all-reduce of a
 * node whose ranks hold replicas of one model (data parallel inside the machine; FSDP shards need
 * no local group: each rank all-reduces its own shard over its rail with lh_allreduce). One per
 * communicator; docs/collectives.md, "Node-local groups". */
typedef struct lh_local_group lh_local_group;

typedef struct lh_local_group_options {
  /* The POSIX shared-memory name the node's ranks meet under ("/" and 1 to 250 bytes of
   * [A-Za-z0-9._-]), the same on every rank of the node. Default NULL: derived from the
   * communicator's master address and node name, so two runs on one machine never meet. */
  const char* name;
  /* Shared memory per rank for one round of a local step; at least 64 bytes per rank of the node.
   * Default 4 MiB. */
  size_t slot_bytes;
  /* How long a rank waits for its siblings at any one local step, forming the group included.
   * Default 120000 (2 min). */
  uint32_t timeout_ms;
  /* Where the node's buffers live. LH_MEMORY_HOST (and the default, LH_MEMORY_AUTO): the local
   * steps run in shared memory; device buffers given to lh_node_allreduce are staged through
   * pinned host memory. LH_MEMORY_CUDA: the local steps run in NCCL on `device`, in device
   * memory (every buffer of lh_node_allreduce must then be device memory), and only each rank's
   * 1/L chunk crosses PCIe, to be sent over its rail; NCCL is loaded at run time
   * (docs/gpu.md), LH_ERR_UNSUPPORTED without CUDA, a device or NCCL. */
  lh_memory memory;
  /* LH_MEMORY_CUDA only: this rank's CUDA device; -1 (the default): the calling thread's current
   * device. */
  int device;
} lh_local_group_options;

/* Fills *options with the defaults above. NULL is ignored. */
void lh_local_group_options_init(lh_local_group_options* options);

/* Forms the local group of `comm`'s node: rank lh_comm_options.node_rail of node_rails (at most
 * 64). Blocks until every rank of the node has called it with the same options (LH_ERR_TIMEOUT
 * after timeout_ms, naming the ranks that never came). Call it before or after lh_comm_connect.
 * From then on, when `comm` fails for good (the master evicted the node because a sibling died:
 * LH_ERR_NODE_EVICTED), the group is aborted, and a sibling that dies is seen by the others within
 * 250 ms even before the master says so: no rank ever waits for a dead sibling. On success *out
 * owns the group: destroy it before its communicator. LH_ERR_INVALID_ARGUMENT for bad options or
 * when the ranks disagree on the node's shape; LH_ERR_IO when the system refuses the shared
 * memory. The message is in lh_comm_last_error and lh_last_error. */
lh_status lh_local_group_create(lh_comm* comm, const lh_local_group_options* options,
                                lh_local_group** out);

/* Ends the group on every rank of the node (for a trainer's own watchdog): the node leaves the
 * run, as when a sibling dies, so lh_node_allreduce in progress or later on any of its ranks
 * returns LH_ERR_NODE_EVICTED with `reason` (may be NULL) in its message, and each rank closes its
 * communicator's session (the master evicts the node; the other nodes retry without it).
 * Thread-safe. */
lh_status lh_local_group_abort(lh_local_group* group, const char* reason);

/* Frees the group; the node then leaves the run as after lh_local_group_abort (the siblings'
 * calls fail with LH_ERR_NODE_EVICTED). NULL is ignored. Must not run during a call on the
 * group. */
void lh_local_group_destroy(lh_local_group* group);

/* The hierarchical all-reduce of a node of L ranks: reduced inside the node through shared
 * memory (rank r keeps chunk r of the node's sum), chunk r all-reduced over rail r (the peer group
 * of rank r of every node: every rail carries 1/L of the buffer, all rails at once), then gathered
 * back inside the node. Every rank of every node calls it with the same arguments at the same
 * point of its sequence of collectives; every node has the same number of ranks. The arguments
 * are lh_allreduce's and follow its rules (send == recv for in place; options as for an
 * all-reduce, the residual holding `count` floats of which this rank keeps its chunk's; device
 * memory is staged through pinned host memory). All or nothing, as lh_allreduce_batch: the master
 * decides each rail's outcome, the node's ranks agree on theirs, so it returns LH_OK on one rank
 * exactly when it does on every rank of every node, with bit-identical results. When an attempt
 * failed anywhere, every rank restores what it sent, calls lh_comm_update_topology itself
 * (admitting no new peer) and retries, up to max_attempts attempts. On failure `send` holds what
 * it held on entry and `recv` is unspecified: LH_ERR_PEER_LOST / LH_ERR_ABORTED after the last
 * attempt (call lh_comm_update_topology and retry), LH_ERR_NODE_EVICTED when this node is finished
 * (a sibling died or its local group failed or was aborted: this rank has closed its session, so
 * the master evicts the node; end every rank of the node and start the node again), or another
 * error. Each retry starts from the node's sum and residual as they were. An
 * in-place call whose node is evicted during its final local step leaves the buffer unspecified.
 * Peers waiting to join are admitted at its start, on every rank of the node at once: a rank that
 * called lh_comm_update_topology alone would wait there for its siblings while they wait for it
 * in the local group, so call lh_comm_update_topology yourself only on every rank of the node
 * together (after a failed lh_node_allreduce, which fails on all of them, is such a point).
 * Nothing else may run on the communicator meanwhile. LH_OP_AVG divides once, by nodes x L. The
 * failure message is in lh_comm_last_error and lh_last_error. */
lh_status lh_node_allreduce(lh_local_group* group, const void* send, void* recv, size_t count,
                            lh_dtype dtype, lh_reduce_op op, const lh_allreduce_options* options,
                            uint32_t max_attempts);

/* ------------------------------------------------------------------------------------------ */
/* Shared state                                                                                */

/* A registry of named tensors (weights, optimizer moments, step counters) that lh_sync_state keeps
 * bit-identical across the peer group, with a revision that counts the syncs. See docs/state.md.
 * The registry only points at the caller's memory: nothing is copied at registration. */
typedef struct lh_state lh_state;

/* Creates an empty registry at revision 0. On success *out owns it: release it with
 * lh_state_destroy. */
lh_status lh_state_create(lh_state** out);

/* Frees the registry (not the tensors it points at). NULL is ignored. Must not run during an
 * lh_sync_state on it. */
void lh_state_destroy(lh_state* state);

/* Registers `count` elements of `dtype` at `data` under `name` (1..1024 bytes, unique in this
 * registry; the order of registration does not matter, tensors are matched by name). The memory
 * stays owned by the caller and must stay valid, and must not be written to while lh_sync_state
 * or lh_state_hash runs on this registry. `data` may be NULL only when count is 0.
 * `name` is copied. LH_ERR_INVALID_ARGUMENT for a NULL name, a name already registered or
 * outside 1..1024 bytes, a bad dtype, NULL data with count > 0, or a count whose byte size
 * exceeds 2^63.
 * CUDA device memory is taken too (detected; docs/gpu.md): lh_state_hash hashes the tensor on the
 * device; the registry keeps a pinned host copy of it, refreshed from the device before every
 * lh_sync_state (only the 1 MiB blocks whose hash changed are copied), and a sync that fetches
 * blocks copies them back to the device; the hash and the wire are a host tensor's, so GPU and
 * CPU peers sync with each other. The copy costs the tensor's size in pinned memory. */
lh_status lh_state_add_tensor(lh_state* state, const char* name, void* data, size_t count,
                              lh_dtype dtype);

/* Sets / reads the revision: the number of syncs this state has been through. A fresh registry
 * is at 0; lh_sync_state sets it to the group's new revision. Set it when restoring a checkpoint.
 */
lh_status lh_state_set_revision(lh_state* state, uint64_t revision);
lh_status lh_state_get_revision(const lh_state* state, uint64_t* revision);

/* A 64-bit hash of the whole state's content (names, types, sizes and bytes; not the revision),
 * the same function on every peer: two registries hash equal iff (barring a 2^-64 collision) they
 * hold the same tensors with the same bytes. Each tensor is hashed in 1 MiB blocks with XXH3,
 * in parallel over blocks; see docs/state.md for the exact definition. */
lh_status lh_state_hash(lh_state* state, uint64_t* hash);

/* How a peer takes part in a sync:
 *   LH_SYNC_ENFORCE_POPULAR  votes with its content; where it differs from the group's popular
 *                            content (per tensor, by majority) it is overwritten with it.
 *   LH_SYNC_RECEIVE_ONLY     does not vote; takes the group's content and revision (a joiner).
 *   LH_SYNC_SEND_ONLY        votes and serves but must not be overwritten: if its content or
 *                            revision differs from the group's, the sync fails on this peer with
 *                            LH_ERR_STATE_MISMATCH instead. */
typedef enum lh_sync_strategy {
  LH_SYNC_ENFORCE_POPULAR = 0,
  LH_SYNC_RECEIVE_ONLY = 1,
  LH_SYNC_SEND_ONLY = 2
} lh_sync_strategy;

/* What one lh_sync_state did on this peer. */
typedef struct lh_sync_info {
  uint64_t tx_bytes;       /* tensor bytes this peer served to others (on the wire, after zstd) */
  uint64_t rx_bytes;       /* tensor bytes this peer fetched (on the wire, after zstd) */
  uint64_t blocks_fetched; /* 1 MiB blocks this peer fetched and verified */
  uint64_t sources;        /* distinct peers it fetched from */
  uint64_t revision;       /* the state's revision afterwards */
} lh_sync_info;

/* Synchronizes `state` with the peer group: a collective, every admitted peer of the group calls
 * it (in the same epoch, between the same lh_comm_update_topology calls). Each peer hashes its
 * tensors and reports the hashes to the master, which elects the popular content of every tensor
 * (majority of the peers at the group's revision; a tie goes to the content held by the lowest
 * peer id) and tells every out-of-date peer which 1 MiB blocks differ and which peers hold them.
 * Such a peer fetches only those blocks, spread over several sources at once (zstd-compressed
 * where a cheap estimate says the block shrinks and, measured per source as the fetch goes,
 * compressing is faster than the link; environment LONGHAUL_STATE_ZSTD=never|always overrides
 * that choice), writes them in place and verifies each by hash; a source
 * that dies mid-transfer is replaced by another. In steady state (all peers in sync) no tensor
 * byte moves. Afterwards every peer that succeeded holds bit-identical state at the group's
 * revision + 1 (a joiner adopts it).
 *
 * Errors (on this peer; the others carry on without it):
 *   LH_ERR_STATE_MISMATCH  the tensor names, types or sizes differ from the group's (the message
 *                          names the tensor); a revision ahead of the group's; a send-only peer
 *                          whose content or revision differs; every peer receive-only.
 *   LH_ERR_PEER_LOST       the master was lost, or every source of some blocks was lost.
 *   LH_ERR_TIMEOUT         a source stalled and no other source holds the blocks.
 *   LH_ERR_ABORTED         the group began reconfiguring (a member waits in
 *                          lh_comm_update_topology) before the sync was planned: call
 *                          lh_comm_update_topology and retry.
 *   LH_ERR_INVALID_ARGUMENT a bad strategy, or another lh_sync_state running on the same
 *                          communicator (one at a time).
 *   LH_ERR_CLOSED          a communicator not connected, left or destroyed.
 * On failure the revision is unchanged; tensors this peer was fetching hold unspecified bytes
 * (re-sync to repair them); tensors it was not fetching are untouched. Neither the tensors nor the
 * registry may be touched by other threads during the call. `info` may be NULL; it is zeroed on
 * entry and, once the sync ran, filled whether it succeeded or failed. */
lh_status lh_sync_state(lh_comm* comm, lh_state* state, lh_sync_strategy strategy,
                        lh_sync_info* info);

/* The message of the last failed call on this registry, or "" (a failed lh_sync_state records its
 * message here as well as on the communicator). Owned by the registry: valid until its next
 * failing call or lh_state_destroy. */
const char* lh_state_last_error(const lh_state* state);

/* ------------------------------------------------------------------------------------------ */
/* Sync engine: DiLoCo, Streaming DiLoCo, CO2 and eager outer loops (docs/training.md)         */

/* Low-communication training across the peer group: the trainer keeps training its own copy of
 * the parameters, and every H inner steps each fragment's pseudo-gradient (global minus local
 * parameters) is averaged over the peers in the background and applied to the global parameters
 * by an outer optimizer, which are merged back into the trainer's copy. The global parameters and
 * the outer optimizer's state are shared state (bit-identical on every peer, downloaded by
 * joiners). One engine per communicator; its calls and the communicator's other calls must not
 * run concurrently, and no lh_allreduce_batch may run beside it (it settles each round with the
 * same mechanism). */
typedef struct lh_sync_engine lh_sync_engine;

/* `count` elements of `dtype` (LH_DTYPE_F32 or LH_DTYPE_BF16) at `data`: some of the trainer's
 * parameters. The memory stays the caller's; it must outlive the engine and must not be written
 * while an lh_sync_engine_* call runs (the engine reads it and merges into it). */
typedef struct lh_param_range {
  void* data;
  size_t count;
  lh_dtype dtype;
} lh_param_range;

/* Elements [offset, offset + count) of range number `range` belong to fragment `fragment`. */
typedef struct lh_fragment_piece {
  uint32_t fragment;
  uint32_t range;
  size_t offset;
  size_t count;
} lh_fragment_piece;

/* LH_OUTER_DILOCO: Nesterov outer SGD on the fresh average, applied `delay` steps after the
 *   launch (DiLoCo with fragments = 1 and delay = 0; Streaming DiLoCo with fragments > 1).
 * LH_OUTER_CO2: CO2 (Sun et al., ICLR 2024): each round's average is applied one round later
 *   (the all-reduce overlaps a whole round), heavy-ball momentum with the staleness gap penalty
 *   and momentum clipping; every peer restarts its round from the global parameters.
 * LH_OUTER_EAGER: eager updates (after Kale et al., 2025): each round's average is applied one
 *   round later with DiLoCo's Nesterov step, and each peer restarts its next round at once from a
 *   tentative Nesterov step of the shared state with its own fresh pseudo-gradient standing in
 *   for the average; the peers' restart points average to DiLoCo's θ_g, which the group
 *   publishes one round late (each peer keeps one vector of its own, docs/training.md). CO2 and
 *   eager need fragments = 1 and delay = 0. */
typedef enum lh_outer_method {
  LH_OUTER_DILOCO = 0,
  LH_OUTER_CO2 = 1,
  LH_OUTER_EAGER = 2
} lh_outer_method;

/* What a round whose all-reduce failed (a peer was lost) becomes: LH_LOSS_RETRY runs it again over
 * the survivors with a fresh pseudo-gradient (DiLoCo only; up to max_attempts tries), LH_LOSS_DROP
 * skips that fragment's outer update this round. A round that failed without a peer lost (its
 * deadline passed somewhere) is dropped either way, as are CO2's and eager's failed rounds. */
typedef enum lh_loss_policy { LH_LOSS_RETRY = 0, LH_LOSS_DROP = 1 } lh_loss_policy;

typedef struct lh_sync_engine_options {
  const lh_param_range* ranges; /* required, range_count >= 1 */
  size_t range_count;
  /* The fragments' layout. NULL/0 (the default): range i is fragment i mod `fragments`. Pieces
   * must lie inside their range and not overlap; every fragment must get an element. */
  const lh_fragment_piece* pieces;
  size_t piece_count;
  uint32_t fragments;  /* F; default 1 */
  uint32_t sync_every; /* H: inner steps between two syncs of a fragment; default 100 */
  /* tau: inner steps between a round's launch and its outer update (0: blocking); must be below
   * H, and at most H / F when F > 1. Default 0. */
  uint32_t delay;
  lh_outer_method method; /* default LH_OUTER_DILOCO */
  /* DiLoCo and eager; default 0.7. */
  float outer_lr;
  float outer_momentum; /* Nesterov momentum; default 0.9 */
  /* alpha of the merge local <- alpha * local + (1 - alpha) * global, in [0, 1); default 0. */
  float mix;
  float co2_lr;          /* CO2's outer lr; default 1.0 */
  float co2_momentum;    /* CO2's heavy-ball momentum; default 0.2 */
  float co2_gap_penalty; /* CO2's staleness gap penalty (>= 1; 1 is off); default 1.0 */
  float co2_clip;        /* CO2's momentum clip (element-wise, > 0), 0 is off; default 0 */
  /* The pseudo-gradients' wire codec; default LH_CODEC_NONE. LH_CODEC_SPARSE (LH_OUTER_DILOCO
   * only, Streaming DiLoCo included): each peer sends the top topk_per_chunk values of every chunk
   * of its pseudo-gradient, 2 bits each plus a 12-bit index at chunk 4096, keeping what it did
   * not send in a residual for its next rounds (part of the checkpoint); every peer sums the
   * encodings it accepted in ring order, and a malformed one is excluded from the mean and named
   * (lh_sync_engine_last_excluded), as a non-finite one is (docs/training.md). */
  lh_codec codec;
  uint32_t block;         /* elements per quantization block; default 128 */
  lh_loss_policy on_loss; /* default LH_LOSS_RETRY */
  uint32_t max_attempts;  /* tries of one round under LH_LOSS_RETRY; default 3 */
  /* A round not done this long after its launch is dropped on every peer and counted as late;
   * 0 (the default): no deadline. With adaptive_deadline (below): the most the deadline may be.
   * Each peer's own: peers of one group may set different deadlines. */
  uint32_t deadline_ms;
  /* 0 (the default): the shared state is synced when peers join; k > 0: also at every k-th
   * admission point, which checks every peer's copy by hash (no bytes move when they agree). */
  uint32_t verify_every;
  /* NULL (the default): a fresh start. Else an engine checkpoint written by lh_sync_engine_save:
   * the engine resumes from it, exactly, when every peer of the group resumes from its
   * checkpoint of the same step (the trainer restores its own parameters and optimizer). A
   * checkpoint the group outvotes (another step) fails the start with LH_ERR_STATE_MISMATCH:
   * start without it to join as a new peer. Copied by lh_sync_engine_start. */
  const char* resume_path;
  /* Where the ranges live; default LH_MEMORY_AUTO (asks the CUDA runtime about each range).
   * Ranges in CUDA device memory are staged: before the engine reads a fragment (to form its
   * pseudo-gradient) its device pieces are copied to a pinned host mirror, and after it writes
   * them (the merge) they are copied back, on the GPU layer's copy stream; lh_sync_engine_step
   * returns once they have arrived. The arithmetic is the host's, so GPU and CPU peers train
   * one θ_g bit for bit. The stream that wrote the parameters must be done before each
   * lh_sync_engine_step (synchronised, or the legacy default stream). Costs one mirror of the
   * largest fragment's device bytes in pinned memory; a sync moves each fragment across PCIe
   * once each way at its own precision (docs/gpu.md). Without a usable device, a range declared
   * LH_MEMORY_CUDA fails the start with LH_ERR_UNSUPPORTED "no CUDA device: ...". */
  lh_memory memory;
  /* Nonzero: the engine sizes tau itself at every H steps (docs/overlap.md): the steps that cover
   * the slowest peer's measured sync time, within [1, max_staleness_steps] and the schedule's
   * bound; `delay` is the first cycle's tau. LH_OUTER_DILOCO only. Default 0 (tau stays `delay`:
   * with it on, two runs of one seed no longer give the same theta_g). */
  int adaptive_delay;
  uint32_t max_staleness_steps; /* with adaptive_delay: the most steps tau may be; default 5 */
  /* LH_CODEC_SPARSE (codec): values sent per chunk at most, >= 1 (default 64), and elements per
   * chunk, 1..65535 (default 4096). Last in the struct: older callers' layouts stay valid. */
  uint32_t topk_per_chunk;
  uint32_t chunk;
  /* Nonzero: the deadline follows the group (docs/training.md, "Settling a round"): each round's
   * is median + max(4 * MAD, median / 2) of the fastest peer's sync time in each of the last 16
   * applied rounds, within [1 s, deadline_ms]; deadline_ms (which must then be > 0) until 4 rounds
   * were measured. The fastest peer's, because the others' include waiting for the last one: a
   * peer that is always late does not stretch the deadline that catches it. Default 0 (the
   * deadline stays deadline_ms). Last in the struct: older callers' layouts stay valid. */
  int adaptive_deadline;
} lh_sync_engine_options;

/* Fills *options with the defaults above. NULL is ignored. */
void lh_sync_engine_options_init(lh_sync_engine_options* options);

/* The rules lh_sync_engine_start checks before anything is sent (LH_ERR_INVALID_ARGUMENT unless
 * said otherwise): ranges non-NULL with range_count >= 1, every range's dtype LH_DTYPE_F32 or
 * LH_DTYPE_BF16 (another: LH_ERR_UNSUPPORTED); pieces non-NULL when piece_count > 0, each inside
 * its range, none overlapping, every fragment given an element; 1 <= fragments <= sync_every;
 * delay < sync_every, and delay <= sync_every / fragments when fragments > 1; LH_OUTER_CO2 and
 * LH_OUTER_EAGER need fragments = 1 and delay = 0; max_attempts >= 1; a valid codec, and block
 * 1..2^30 for U8/U4/E3M0; LH_CODEC_SPARSE with LH_OUTER_DILOCO only (another method:
 * LH_ERR_UNSUPPORTED), topk_per_chunk >= 1 and chunk 1..65535; mix in [0, 1); outer_lr > 0 and
 * outer_momentum in [0, 1) (finite); with LH_OUTER_CO2, co2_lr > 0, co2_momentum in [0, 1),
 * co2_gap_penalty >= 1, co2_clip >= 0; adaptive_delay with LH_OUTER_DILOCO only, and
 * max_staleness_steps >= 1; adaptive_deadline with deadline_ms > 0. */

/* Starts the engine: a collective of the communicator's admitted peers, which must all call it
 * with the same options (a peer configured differently fails with LH_ERR_STATE_MISMATCH). The
 * group's first start elects one set of global parameters among the peers' own (the popular
 * content; a tie goes to the lowest peer id) and every peer's parameters are set to it; a peer
 * that starts later downloads the global parameters, the outer state and the step counters and
 * joins the schedule where the group is. The ranges are only pointed at, not copied. Errors:
 * LH_ERR_CLOSED for a communicator not connected, left or destroyed,
 * LH_ERR_INVALID_ARGUMENT / LH_ERR_UNSUPPORTED for bad options (nothing is sent), the session's or
 * the state sync's errors. On failure *out is NULL and the message is in lh_comm_last_error and
 * lh_last_error. On success *out owns the engine: release it with lh_sync_engine_destroy, before
 * lh_comm_destroy. The options' strings and arrays are copied (the memory the ranges point at is
 * not). */
lh_status lh_sync_engine_start(lh_comm* comm, const lh_sync_engine_options* options,
                               lh_sync_engine** out);

/* Call after every inner optimizer step. Launches each fragment's round when due (and returns
 * at once: the all-reduce travels while the trainer computes), applies the outer update and
 * merges into the parameters when a round is due, and every H steps admits joiners (every peer
 * reaches that point at the same step). Errors: the session failed (LH_ERR_PEER_LOST,
 * LH_ERR_CLOSED, ...), this peer was refused by a shared-state sync, LH_ERR_CLOSED after
 * lh_sync_engine_close. Lost peers are not errors: their rounds are retried or dropped. */
lh_status lh_sync_engine_step(lh_sync_engine* engine);

/* Settles the round in flight with the group (applies or drops it) and stops; later steps fail
 * with LH_ERR_CLOSED. Idempotent. Call it on every peer at the same step before leaving, so the
 * last round completes everywhere. */
lh_status lh_sync_engine_close(lh_sync_engine* engine);

/* Writes the engine's part of a checkpoint to `path` (atomically: PATH.tmp renamed over PATH).
 * Call it right after lh_sync_engine_step, on every peer at the same step: a round in flight is
 * settled with the group first (its all-reduce waited for, its outcome decided) and is applied at
 * its scheduled step after a resume, so the resumed run continues exactly. `path` must not be
 * NULL. Errors: LH_ERR_IO, the session's errors, LH_ERR_CLOSED after close. */
lh_status lh_sync_engine_save(lh_sync_engine* engine, const char* path);

/* Frees the engine (a round still in flight is abandoned: the others see it fail). NULL is
 * ignored. Does not close the communicator; must run before lh_comm_destroy. */
void lh_sync_engine_destroy(lh_sync_engine* engine);

typedef struct lh_sync_stats {
  uint64_t steps;               /* inner steps the group has finished */
  uint64_t rounds_applied;      /* rounds settled with an outer update, on this peer */
  uint64_t rounds_dropped;      /* rounds settled without one */
  uint64_t rounds_late;         /* of those, dropped because this peer's deadline passed */
  uint64_t retries;             /* rounds run again after a peer was lost */
  uint64_t non_finite_excluded; /* contributions (any peer's) excluded as non-finite */
  uint64_t blocked_ns;          /* time spent inside the engine's calls (the trainer waited) */
  /* the most bytes this peer's data links sent and received (at the sockets, frame headers
   * included) between one round's launch and its end */
  uint64_t peak_event_bytes;
  uint64_t memory_bytes; /* the engine's own buffers (docs/training.md has the bound) */
  /* the communicator's traffic since the engine started, at the sockets (lh_traffic): data (the
   * rounds' all-reduces), control (the master: settling rounds, admission, state-sync plans) and
   * state (the shared-state syncs' block transfers) */
  lh_traffic traffic;
  /* the last settled round */
  uint32_t last_fragment;
  uint64_t last_round;
  int last_applied;           /* 1 applied, 0 dropped */
  uint32_t last_participants; /* peers whose contribution was counted */
  uint32_t last_attempts;
  /* The overlap (docs/overlap.md). delay: tau in effect now (the group's: every peer the same at
   * the same step); delay_needed: the most steps any peer reported needing over the last cycle of
   * H steps, which an adaptive tau was taken from (0: none reported); delay_changes: cycles that
   * began with another tau than the one before. This peer's own measurements: sync_time_ns, from
   * its last applied round's launch to its result being ready here, and step_time_ns, its
   * trainer's compute time per step (a weighted mean); slowest_sync_ns: the longest sync time any
   * peer reported in the last round applied. 0 until measured. */
  uint32_t delay;
  uint32_t delay_needed;
  uint64_t delay_changes;
  uint64_t sync_time_ns;
  uint64_t step_time_ns;
  uint64_t slowest_sync_ns;
  /* For a timeline of the rounds, times on the steady clock (CLOCK_MONOTONIC, as C++'s
   * std::chrono::steady_clock), in ns; 0: not measured (a round read from a checkpoint). The last
   * settled round's launch (its last attempt's) and when its result was ready on this peer: */
  uint64_t last_launched_ns;
  uint64_t last_ready_ns;
  /* The round in flight when the last lh_sync_engine_step returned (in_flight 1; the fields
   * below are 0 when in_flight is 0): its fragment and number, the step that applies it, its
   * launch, and whether its result was seen ready here (at the start of a step) and when. */
  int in_flight;
  uint32_t in_flight_fragment;
  uint64_t in_flight_round;
  uint64_t in_flight_apply_step;
  uint64_t in_flight_launched_ns;
  int in_flight_ready;
  uint64_t in_flight_ready_ns;
  /* LH_CODEC_SPARSE: encodings (any peer's) every peer refused as malformed and excluded from
   * the mean, summed over rounds (lh_sync_engine_last_excluded names the last round's). Last in
   * the struct: older callers' layouts stay valid. */
  uint64_t malformed_excluded;
  /* The deadline the last settled round was waited for with: deadline_ms, or with
   * adaptive_deadline the one that follows the group; 0: none, or no round settled yet. */
  uint32_t deadline_ms;
  /* LH_CODEC_SPARSE: this peer's encodings of its pseudo-gradients, one per settled round (its
   * last attempt's), summed, in bytes, before any framing: a fragment's f32 bytes times the
   * rounds settled, over this, is the codec's own ratio. 0 with a dense codec. */
  uint64_t sparse_encoded_bytes;
} lh_sync_stats;

/* Fills *stats (the last_* fields are 0 before the first settled round). Thread-safe. */
lh_status lh_sync_engine_get_stats(const lh_sync_engine* engine, lh_sync_stats* stats);

/* The peer ids whose contribution to the last settled round was excluded: as non-finite, then
 * (LH_CODEC_SPARSE) as a malformed encoding every peer refused, each in ring order; up to
 * `capacity` into `ids`, the number in *count (which may exceed capacity: call again with a
 * larger buffer; 0 before the first settled round). `ids` may be NULL when capacity is 0. */
lh_status lh_sync_engine_last_excluded(const lh_sync_engine* engine, uint64_t* ids, size_t capacity,
                                       size_t* count);

/* The hash of the engine's shared state (global parameters, outer state, counters,
 * configuration): the same on every peer between the same steps. */
lh_status lh_sync_engine_hash(lh_sync_engine* engine, uint64_t* hash);

/* Copies fragment `fragment`'s global parameters (fp32) into `out`. LH_ERR_INVALID_ARGUMENT
 * unless fragment < fragments and `count` equals the fragment's size; `out` may be NULL only
 * when count is 0. */
lh_status lh_sync_engine_get_global(lh_sync_engine* engine, uint32_t fragment, float* out,
                                    size_t count);

/* The message of the last failed call on this engine, or "" (also for a NULL engine). Owned by
 * the engine: valid until its next failing call or lh_sync_engine_destroy. */
const char* lh_sync_engine_last_error(const lh_sync_engine* engine);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LONGHAUL_LONGHAUL_H_ */
