// Option defaults are written once, in the library's internal option structs: the C init
// functions copy them and the C++ option structs of longhaul.hpp copy the C init. These tests pin
// that the three agree, field by field.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <longhaul/longhaul.h>
#include <longhaul/longhaul.hpp>

#include "collective/allreduce_spec.hpp"
#include "common/host_port.hpp"
#include "master/server.hpp"
#include "peer/options.hpp"
#include "runtime/runtime.hpp"

namespace {

using std::chrono::milliseconds;

uint32_t ms(milliseconds d) {
  return static_cast<uint32_t>(d.count());
}
std::string str(const char* s) {
  return s ? s : "";
}

TEST(OptionDefaults, CommunicatorOptionsAgreeInCInitCppAndPeer) {
  lh_comm_options c;
  lh_comm_options_init(&c);
  const longhaul::CommunicatorOptions cpp;
  const longhaul::peer::CommunicatorOptions peer;

  EXPECT_EQ(str(c.master_address), peer.master_address);
  EXPECT_EQ(c.peer_group, peer.group);
  EXPECT_EQ(c.connections_per_link, peer.connections_per_link);
  EXPECT_EQ(str(c.secret), peer.transport.secret);
  EXPECT_EQ(c.use_tls != 0, peer.transport.tls.enabled);
  EXPECT_EQ(str(c.tls_cert_file), peer.transport.tls.cert_file);
  EXPECT_EQ(str(c.tls_key_file), peer.transport.tls.key_file);
  EXPECT_EQ(str(c.tls_ca_file), peer.transport.tls.ca_file);
  EXPECT_EQ(str(c.listen_address), peer.listen_address);
  EXPECT_EQ(str(c.advertised_address), peer.advertised_address);
  EXPECT_EQ(c.connect_timeout_ms, ms(peer.connect_timeout));
  EXPECT_EQ(c.link_timeout_ms, ms(peer.link_timeout));
  EXPECT_EQ(c.handshake_timeout_ms, ms(peer.transport.handshake_timeout));
  EXPECT_EQ(c.io_threads, longhaul::runtime::RuntimeOptions{}.io_threads);
  EXPECT_EQ(c.full_mesh != 0, peer.full_mesh);
  EXPECT_EQ(c.state_stall_timeout_ms, ms(peer.state_stall_timeout));
  // No launcher environment under ctest: a node of one rail.
  EXPECT_EQ(str(c.node), peer.node);
  EXPECT_EQ(c.node_rail, peer.rail);
  EXPECT_EQ(c.node_rails, peer.rails);
  EXPECT_EQ(c.link_upload_mbit, peer.transport.link_rate_bytes_per_s * 8 / 1'000'000);
  EXPECT_EQ(c.min_peers, peer.min_peers);
  // NULL means "auto", the internal default.
  EXPECT_EQ(c.tcp_congestion, nullptr);
  EXPECT_EQ(peer.transport.socket.congestion_control, "auto");

  EXPECT_EQ(cpp.master_address, str(c.master_address));
  EXPECT_EQ(cpp.peer_group, c.peer_group);
  EXPECT_EQ(cpp.connections_per_link, c.connections_per_link);
  EXPECT_EQ(cpp.secret, str(c.secret));
  EXPECT_EQ(cpp.use_tls, c.use_tls != 0);
  EXPECT_EQ(cpp.tls_cert_file, str(c.tls_cert_file));
  EXPECT_EQ(cpp.tls_key_file, str(c.tls_key_file));
  EXPECT_EQ(cpp.tls_ca_file, str(c.tls_ca_file));
  EXPECT_EQ(cpp.listen_address, str(c.listen_address));
  EXPECT_EQ(cpp.advertised_address, str(c.advertised_address));
  EXPECT_EQ(cpp.connect_timeout_ms, c.connect_timeout_ms);
  EXPECT_EQ(cpp.link_timeout_ms, c.link_timeout_ms);
  EXPECT_EQ(cpp.handshake_timeout_ms, c.handshake_timeout_ms);
  EXPECT_EQ(cpp.io_threads, c.io_threads);
  EXPECT_EQ(cpp.full_mesh, c.full_mesh != 0);
  EXPECT_EQ(cpp.state_stall_timeout_ms, c.state_stall_timeout_ms);
  EXPECT_EQ(cpp.node, str(c.node));
  EXPECT_EQ(cpp.node_rail, c.node_rail);
  EXPECT_EQ(cpp.node_rails, c.node_rails);
  EXPECT_EQ(cpp.link_upload_mbit, c.link_upload_mbit);
  EXPECT_EQ(cpp.min_peers, c.min_peers);
  EXPECT_EQ(cpp.tcp_congestion, str(c.tcp_congestion));
}

TEST(OptionDefaults, MasterOptionsAgreeInCInitCppAndMaster) {
  lh_master_options c;
  lh_master_options_init(&c);
  const longhaul::MasterOptions cpp;
  const longhaul::master::MasterOptions master;

  std::string host;
  uint16_t port = 1;
  ASSERT_TRUE(longhaul::parse_host_port(str(c.listen_address), &host, &port).is_ok());
  EXPECT_EQ(host, master.listen_host);
  EXPECT_EQ(port, master.listen_port);
  EXPECT_EQ(str(c.secret), master.transport.secret);
  EXPECT_EQ(str(c.tls_cert_file), master.transport.tls.cert_file);
  EXPECT_EQ(str(c.tls_key_file), master.transport.tls.key_file);
  EXPECT_EQ(c.heartbeat_interval_ms, ms(master.heartbeat_interval));
  EXPECT_EQ(c.heartbeat_misses, master.heartbeat_misses);
  EXPECT_EQ(c.topology_timeout_ms, ms(master.topology_timeout));
  EXPECT_EQ(c.handshake_timeout_ms, ms(master.transport.handshake_timeout));
  EXPECT_EQ(c.io_threads, 0u);

  EXPECT_EQ(cpp.listen_address, str(c.listen_address));
  EXPECT_EQ(cpp.secret, str(c.secret));
  EXPECT_EQ(cpp.tls_cert_file, str(c.tls_cert_file));
  EXPECT_EQ(cpp.tls_key_file, str(c.tls_key_file));
  EXPECT_EQ(cpp.heartbeat_interval_ms, c.heartbeat_interval_ms);
  EXPECT_EQ(cpp.heartbeat_misses, c.heartbeat_misses);
  EXPECT_EQ(cpp.topology_timeout_ms, c.topology_timeout_ms);
  EXPECT_EQ(cpp.handshake_timeout_ms, c.handshake_timeout_ms);
  EXPECT_EQ(cpp.io_threads, c.io_threads);
}

TEST(OptionDefaults, AllReduceOptionsAgreeInCInitCppAndSpec) {
  lh_allreduce_options c;
  lh_allreduce_options_init(&c);
  const longhaul::AllReduceOptions cpp;
  const longhaul::collective::AllReduceSpec spec;

  EXPECT_EQ(static_cast<int>(c.codec), static_cast<int>(spec.codec));
  EXPECT_EQ(c.block, spec.block);
  EXPECT_EQ(static_cast<int>(c.schedule), static_cast<int>(spec.schedule));
  EXPECT_EQ(c.residual, spec.residual);
  EXPECT_EQ(c.segment_bytes, spec.segment_bytes);
  EXPECT_EQ(c.restore_input != 0, spec.restore_input);

  EXPECT_EQ(cpp.codec, c.codec);
  EXPECT_EQ(cpp.block, c.block);
  EXPECT_EQ(cpp.schedule, c.schedule);
  EXPECT_EQ(cpp.residual.data(), c.residual);
  EXPECT_EQ(cpp.segment_bytes, c.segment_bytes);
  EXPECT_EQ(cpp.restore_input, c.restore_input != 0);
}

}  // namespace
