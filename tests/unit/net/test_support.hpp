// Shared helpers for the transport tests: link pairs over loopback, TLS material, waiting.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "net/endpoint.hpp"

namespace longhaul::net::testing {

// A self-signed certificate and key in a fresh temporary directory (made once per process).
struct TlsFiles {
  std::string cert;
  std::string key;
};
const TlsFiles& test_certificate();
TransportOptions tls_options(TransportOptions base = {});

// Both ends of one link over loopback (the server side accepted by a listener).
struct LinkPair {
  std::shared_ptr<Listener> listener;
  std::shared_ptr<Link> client;
  std::shared_ptr<Link> server;
  ~LinkPair();
};

// Connects a K-connection link; both ends are started. Fails the test on error.
std::unique_ptr<LinkPair> connect_pair(runtime::IoRuntime& io, uint16_t connections,
                                       const TransportOptions& server_options,
                                       const TransportOptions& client_options,
                                       const std::string& host = "127.0.0.1");

// A completion whose Status can be awaited with a timeout. The callback owns the promise, so a
// completion that runs after a timed-out wait (and after the Done is gone) is harmless.
class Done {
 public:
  Link::Completion callback() {
    return [promise = promise_](Status s) { promise->set_value(std::move(s)); };
  }
  // Returns LH_ERR_TIMEOUT if the completion did not run in time.
  Status wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));

 private:
  std::shared_ptr<std::promise<Status>> promise_ = std::make_shared<std::promise<Status>>();
  std::future<Status> future_ = promise_->get_future();
};

}  // namespace longhaul::net::testing
