// The control-message seeds of wire_fuzz: every type of wire::ControlMessage (protocol version
// 11), with the fields that make its decoder work (lists, strings, options), and a few just past a
// limit. make_seeds.cpp fails when a type has no seed here, so a new message cannot be missed.
#include <string>

#include "seed_writer.hpp"

namespace longhaul::fuzz {
namespace {

namespace w = wire;

// Joining, rounds and leaving (docs/protocol.md).
void membership_seeds() {
  write_control_seed("control_register", w::RegisterMsg{0, "10.0.0.7", 4000, "", 0, 1, true});
  write_control_seed("control_register_node", w::RegisterMsg{1, "", 4000, "gpu-box-7", 1, 8});
  write_control_seed("bad_control_register_rail_out_of_range",
                     w::RegisterMsg{1, "", 4000, "gpu-box-7", 8, 8});
  write_control_seed("control_welcome", w::WelcomeMsg{17, 250, 4});
  write_control_seed("control_heartbeat", w::HeartbeatMsg{});
  write_control_seed("control_update_topology", w::UpdateTopologyMsg{12, false});
  write_control_seed("control_topology_unchanged", w::TopologyUnchangedMsg{12});
  write_control_seed("control_topology",
                     w::TopologyMsg{9, {{1, 0, "a", 1}, {2, 0, "b", 2}}, {{0, {2, 1}}}, 0, {}});
  // A change to the receiver's epoch (protocol version 7): one newcomer, one member gone.
  write_control_seed("control_topology_delta",
                     w::TopologyMsg{10, {{4, 0, "d", 4}}, {{0, {4}}}, 9, {2}});
  write_control_seed("control_links_ready", w::LinksReadyMsg{10, {3, 8}});
  write_control_seed("control_epoch_commit", w::EpochCommitMsg{10, 4242, true});
  write_control_seed("control_pending_changed", w::PendingChangedMsg{true});
  write_control_seed("control_leave", w::LeaveMsg{"benchmark done"});
  write_control_seed("control_bye", w::ByeMsg{});
  write_control_seed("control_removed",
                     w::RemovedMsg{LH_ERR_TIMEOUT, "missed 3 heartbeats in a row"});
  write_control_seed("control_peer_hello", w::PeerHelloMsg{10, 3});
  write_control_seed("control_peer_hello_ack", w::PeerHelloAckMsg{10, 4});
}

// Aborts and the agreed outcome of an attempt (batches, single all-reduces, rounds).
void failure_seeds() {
  write_control_seed("control_abort",
                     w::AbortMsg{10, 0, LH_ERR_ABORTED, "peer 3 is waiting for a reconfiguration"});
  write_control_seed("control_report_peer_lost",
                     w::ReportPeerLostMsg{10, 5, "connection reset by peer"});
  write_control_seed("control_abort_request",
                     w::AbortRequestMsg{10, "the operation (epoch 10, number 2) timed out"});
  write_control_seed("control_batch_report", w::BatchReportMsg{10, 3, true});
  write_control_seed("control_batch_report_late", w::BatchReportMsg{10, 4, false, true});
  write_control_seed("control_batch_decision", w::BatchDecisionMsg{10, 3, false});
  // Just past the reason limit.
  write_control_seed(
      "bad_control_abort_reason_1025",
      w::AbortMsg{10, 0, LH_ERR_PEER_LOST, std::string(w::kMaxReasonBytes + 1, 'r')});
}

// Shared state: reports, plans and block transfers, whose fields are the richest.
void state_seeds() {
  write_control_seed(
      "control_state_report",
      w::StateReportMsg{3,
                        1u << 20,
                        7,
                        w::SyncStrategy::kEnforcePopular,
                        {{"moments", 0, 300000, {11, 12}, {0x02}}, {"step", 8, 1, {13}, {0}}}});
  write_control_seed("control_state_plan",
                     w::StatePlanMsg{3,
                                     LH_OK,
                                     "",
                                     8,
                                     {{2, "10.0.0.2", 4000}, {5, "10.0.0.5", 4000}},
                                     {{0, {2, 5}, {{1, 99, true}}}}});
  write_control_seed("control_state_done", w::StateDoneMsg{3, LH_ERR_IO, "block 7 hash mismatch"});
  write_control_seed("control_state_complete", w::StateCompleteMsg{3});
  write_control_seed("control_state_fetch", w::StateFetchMsg{9, 1, 16, 8, false});
  write_control_seed(
      "control_state_blocks_z",
      w::StateBlocksZMsg{9, {{true, {std::byte{0x28}, std::byte{0xb5}}}, {false, {}}}});
  write_control_seed("control_state_fetch_failed",
                     w::StateFetchFailedMsg{9, LH_ERR_ABORTED, "the sync was released"});
  write_control_seed("control_state_source_lost", w::StateSourceLostMsg{9, 5});
}

// Nodes (protocol 5), node agreement (9, 10), observability (6, 11), master restart (7, 10).
void node_and_run_seeds() {
  write_control_seed("control_node_waiting", w::NodeWaitingMsg{8, {0, 1, 5}});
  write_control_seed("control_node_agree", w::NodeAgreeMsg{3, 2, 1});
  write_control_seed("control_node_agreed", w::NodeAgreedMsg{3, 1});
  w::PeerStatsMsg stats;
  stats.epoch = 9;
  stats.data_sent = 1;
  stats.has_state = stats.has_engine = true;
  stats.outer_rounds = 40;
  stats.rounds_dropped = 2;
  stats.delay = 3;  // the overlap's figures (protocol version 11)
  stats.delay_needed = 4;
  stats.delay_changes = 1;
  stats.sync_time_ns = 350'000'000;
  stats.step_time_ns = 100'000'000;
  stats.links = {{2, 4, 1500, 1u << 20, 99, 98, 1}};
  write_control_seed("control_peer_stats", stats);
  stats.has_engine = false;  // a peer without an engine cannot have a τ
  write_control_seed("bad_control_peer_stats_engine_figures_without_engine", stats);
  w::RejoinMsg rejoin;
  rejoin.peer_id = 5;
  rejoin.advertised_port = 4000;
  rejoin.epoch = 12;
  rejoin.world = 3;
  rejoin.ring = {3, 5, 7};
  rejoin.proposed_epoch = 13;
  rejoin.proposed_ring = {5, 7};
  rejoin.decided_attempt = 2;
  write_control_seed("control_rejoin", rejoin);
  rejoin.node = "host-3";  // a rail of a node with its last node agreement answer
  rejoin.rail = 1;
  rejoin.rails = 2;
  rejoin.node_answered = 4;
  rejoin.node_answer = 1;
  rejoin.full_mesh = true;
  rejoin.decided_ok = true;
  write_control_seed("control_rejoin_rail", rejoin);
}

}  // namespace

void control_seeds() {
  membership_seeds();
  failure_seeds();
  state_seeds();
  node_and_run_seeds();
}

}  // namespace longhaul::fuzz
