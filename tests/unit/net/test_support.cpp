#include "test_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace longhaul::net::testing {

const TlsFiles& test_certificate() {
  static const TlsFiles files = [] {
    char dir_template[] = "/tmp/longhaul-tls-XXXXXX";
    const char* dir = mkdtemp(dir_template);
    EXPECT_NE(dir, nullptr);
    TlsFiles f{std::string(dir) + "/cert.pem", std::string(dir) + "/key.pem"};
    const std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=localhost -keyout " +
        f.key + " -out " + f.cert + " >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return f;
  }();
  return files;
}

TransportOptions tls_options(TransportOptions base) {
  base.tls.enabled = true;
  base.tls.cert_file = test_certificate().cert;
  base.tls.key_file = test_certificate().key;
  return base;
}

LinkPair::~LinkPair() {
  if (client) client->close();
  if (server) server->close();
  if (listener) listener->close();
}

std::unique_ptr<LinkPair> connect_pair(runtime::IoRuntime& io, uint16_t connections,
                                       const TransportOptions& server_options,
                                       const TransportOptions& client_options,
                                       const std::string& host) {
  auto pair = std::make_unique<LinkPair>();
  auto listener = Listener::create(io, host, 0, server_options);
  EXPECT_TRUE(listener.is_ok()) << listener.status().to_string();
  if (!listener) return nullptr;
  pair->listener = *listener;
  std::promise<std::shared_ptr<Link>> accepted;
  pair->listener->start(
      [&accepted](std::shared_ptr<Link> link, Role) { accepted.set_value(std::move(link)); });
  auto client = connect_link(io, host, pair->listener->port(), connections, client_options);
  EXPECT_TRUE(client.is_ok()) << client.status().to_string();
  if (!client) return nullptr;
  pair->client = *client;
  auto server = accepted.get_future();
  EXPECT_EQ(server.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  pair->server = server.get();
  pair->client->start();
  pair->server->start();
  EXPECT_EQ(pair->client->connection_count(), connections);
  EXPECT_EQ(pair->server->connection_count(), connections);
  return pair;
}

Status Done::wait(std::chrono::milliseconds timeout) {
  if (future_.wait_for(timeout) != std::future_status::ready)
    return timeout_error("completion did not run");
  return future_.get();
}

}  // namespace longhaul::net::testing
