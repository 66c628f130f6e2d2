// longhaul-linkperf: measures a longhaul link between two processes, like iperf3 for longhaul.
#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/log.hpp"
#include "linkperf_protocol.hpp"
#include "net/endpoint.hpp"

namespace longhaul::linkperf {
namespace {

constexpr char kUsage[] = R"(longhaul-linkperf: measure a longhaul link (K TCP connections, optional TLS) between two processes.

Run a server on one machine and a client on another (or both on one):
  longhaul-linkperf server --listen 127.0.0.1:0 --port-file /tmp/port
  longhaul-linkperf client --connect 127.0.0.1:$(cat /tmp/port) -k 4 --bytes 256MiB --iterations 5

The client sends --bytes per iteration (or receives them with --reverse) and reports the
throughput once the server has every byte. Both sides must agree on --secret-file and TLS.

Options:
  --listen HOST:PORT     server: address to listen on (port 0 picks a free port)   [127.0.0.1:0]
  --port-file FILE       server: write the bound port to FILE once listening
  --connect HOST:PORT    client: server to measure against
  -k, --connections N    client: TCP connections in the link, 1..64                 [4]
  --bytes SIZE           client: payload per iteration (suffixes KiB, MiB, GiB)     [256MiB]
  --iterations N         client: number of timed transfers                          [5]
  --reverse              client: the server sends, the client receives
  --loop                 client: repeat transfers until the link fails, then report the error
  --segment SIZE         segment size for striping                                  [1MiB]
  --threads N            I/O threads                                                [2]
  --secret-file FILE     cluster secret (first line of FILE); both sides must match
  --tls                  client: use TLS 1.3
  --tls-cert FILE --tls-key FILE   server: enable TLS 1.3 with this certificate and key
  --json                 client: print the result as one JSON object
  --log-level LEVEL      debug, info, warn, error                                   [warn]
  -h, --help             this text
)";

struct Config {
  std::string mode;
  std::string listen = "127.0.0.1:0";
  std::string connect;
  std::string port_file;
  uint16_t connections = 4;
  uint64_t bytes = 256ull << 20;
  int iterations = 5;
  bool reverse = false;
  bool loop = false;
  bool json = false;
  unsigned threads = 2;
  net::TransportOptions transport;
};

bool parse_size(const std::string& text, uint64_t* out) {
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (...) {
    return false;
  }
  const std::string suffix = text.substr(pos);
  uint64_t mult = 1;
  if (suffix == "KiB" || suffix == "K") mult = 1ull << 10;
  else if (suffix == "MiB" || suffix == "M") mult = 1ull << 20;
  else if (suffix == "GiB" || suffix == "G") mult = 1ull << 30;
  else if (!suffix.empty()) return false;
  *out = v * mult;
  return true;
}

int usage_error(const std::string& why) {
  std::fprintf(stderr, "longhaul-linkperf: %s\nRun 'longhaul-linkperf --help' for usage.\n", why.c_str());
  return 2;
}

std::vector<std::byte> pattern(size_t n) {
  std::vector<std::byte> v(n);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<std::byte>(x);
  }
  return v;
}

// Buffers are reused across iterations so page faults do not pollute the measurement.
class BufferPool {
 public:
  std::shared_ptr<std::vector<std::byte>> get(size_t n) {
    std::lock_guard lock(mu_);
    auto& free = free_[n];
    if (free.empty()) return std::make_shared<std::vector<std::byte>>(pattern(n));
    auto b = free.back();
    free.pop_back();
    return b;
  }
  void put(std::shared_ptr<std::vector<std::byte>> b) {
    std::lock_guard lock(mu_);
    free_[b->size()].push_back(std::move(b));
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<std::shared_ptr<std::vector<std::byte>>>> free_;
};

// Serves linkperf requests on one accepted link until it fails.
void serve(const std::shared_ptr<net::Link>& link, const std::shared_ptr<BufferPool>& pool) {
  std::weak_ptr<net::Link> weak = link;
  link->start(
      [weak, pool](std::vector<std::byte> bytes) {
        auto l = weak.lock();
        if (!l) return;
        Message request;
        if (Status s = decode(bytes, &request); !s) {
          l->close(s);
          return;
        }
        auto buffer = pool->get(request.value);
        auto reply = [weak, pool, buffer, request](Status s) {
          pool->put(buffer);
          if (auto l2 = weak.lock())
            l2->send_control(encode(Message{request.command, request.op_id, static_cast<uint64_t>(s.code())}));
        };
        if (request.command == Command::kReceive) l->recv(request.op_id, *buffer, reply);
        else l->send(request.op_id, *buffer, reply);
      },
      [](const Status& why) { log::info("linkperf", "link ended: {}", why.to_string()); });
}

volatile sig_atomic_t g_stop = 0;

int run_server(const Config& c) {
  std::string host;
  uint16_t port;
  if (Status s = net::parse_host_port(c.listen, &host, &port); !s) return usage_error(s.message());
  net::IoRuntime io(c.threads);
  auto listener = net::Listener::create(io, host, port, c.transport);
  if (!listener) {
    std::fprintf(stderr, "longhaul-linkperf: %s\n", listener.status().to_string().c_str());
    return 1;
  }
  auto pool = std::make_shared<BufferPool>();
  std::mutex mu;
  std::vector<std::shared_ptr<net::Link>> links;
  listener.value()->start([&](std::shared_ptr<net::Link> link, net::Role) {
    serve(link, pool);
    std::lock_guard lock(mu);
    links.push_back(std::move(link));
  });
  if (!c.port_file.empty()) {
    const std::string tmp = c.port_file + ".tmp";
    std::ofstream(tmp) << listener.value()->port() << "\n";
    std::rename(tmp.c_str(), c.port_file.c_str());  // atomic: readers never see a partial file
  }
  std::fprintf(stderr, "longhaul-linkperf: listening on %s:%u\n", host.c_str(), listener.value()->port());
  signal(SIGINT, [](int) { g_stop = 1; });
  signal(SIGTERM, [](int) { g_stop = 1; });
  while (!g_stop) pause();
  listener.value()->close();
  std::lock_guard lock(mu);
  for (auto& l : links) l->close();
  return 0;
}

int run_client(const Config& c) {
  std::string host;
  uint16_t port;
  if (Status s = net::parse_host_port(c.connect, &host, &port); !s) return usage_error(s.message());
  net::IoRuntime io(c.threads);
  auto connected = net::connect_link(io, host, port, c.connections, c.transport);
  if (!connected) {
    std::fprintf(stderr, "longhaul-linkperf: %s\n", connected.status().to_string().c_str());
    return 1;
  }
  auto link = *connected;
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, lh_status> replies;
  link->start([&](std::vector<std::byte> bytes) {
    Message reply;
    if (!decode(bytes, &reply)) return;
    std::lock_guard lock(mu);
    replies[reply.op_id] = static_cast<lh_status>(reply.value);
    cv.notify_all();
  }, [&](const Status&) { cv.notify_all(); });

  auto buffer = pattern(c.bytes);
  std::vector<double> gbps;
  Status failure;
  const auto started = std::chrono::steady_clock::now();
  for (uint64_t op = 1; c.loop || op <= static_cast<uint64_t>(c.iterations); ++op) {
    const auto t0 = std::chrono::steady_clock::now();
    std::promise<Status> local;
    auto local_done = local.get_future();
    if (c.reverse) {
      link->recv(op, buffer, [&local](Status s) { local.set_value(s); });
      link->send_control(encode(Message{Command::kSend, op, c.bytes}));
    } else {
      link->send_control(encode(Message{Command::kReceive, op, c.bytes}));
      link->send(op, buffer, [&local](Status s) { local.set_value(s); });
    }
    Status s = local_done.get();
    if (s) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return replies.contains(op) || !link->failure().is_ok(); });
      if (replies.contains(op) && replies[op] != LH_OK)
        s = Status(replies[op], fmt::format("the server reports op {} failed", op));
      else if (!replies.contains(op)) s = link->failure();
    }
    if (!s) {
      failure = s;
      break;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(static_cast<double>(c.bytes) * 8 / seconds / 1e9);
    if (!c.json && !c.loop) std::printf("iteration %llu: %.2f Gbit/s\n", static_cast<unsigned long long>(op), gbps.back());
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  link->close();
  if (!failure.is_ok() && !c.loop) {
    std::fprintf(stderr, "longhaul-linkperf: %s\n", failure.to_string().c_str());
    return 1;
  }
  std::vector<double> sorted = gbps;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  const double best = sorted.empty() ? 0 : sorted.back();
  if (c.json) {
    std::printf("{\"connections\":%u,\"tls\":%s,\"bytes\":%llu,\"iterations\":%zu,\"gbps_median\":%.3f,"
                "\"gbps_best\":%.3f,\"seconds\":%.3f,\"error\":\"%s\"}\n",
                c.connections, c.transport.tls.enabled ? "true" : "false", static_cast<unsigned long long>(c.bytes),
                gbps.size(), median, best, elapsed, failure.is_ok() ? "" : lh_status_string(failure.code()));
  } else {
    std::printf("%zu transfers of %llu bytes over %u connections%s: median %.2f Gbit/s, best %.2f Gbit/s\n",
                gbps.size(), static_cast<unsigned long long>(c.bytes), c.connections,
                c.transport.tls.enabled ? " (TLS)" : "", median, best);
    if (!failure.is_ok()) std::printf("ended by: %s\n", failure.to_string().c_str());
  }
  return failure.is_ok() ? 0 : 1;
}

int main_impl(int argc, char** argv) {
  if (argc < 2) return usage_error("missing mode: server or client");
  Config c;
  c.mode = argv[1];
  if (c.mode == "-h" || c.mode == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (c.mode != "server" && c.mode != "client") return usage_error("mode must be 'server' or 'client'");
  enum { kListen = 256, kPortFile, kConnect, kBytes, kIterations, kReverse, kLoop, kSegment, kThreads, kSecretFile,
         kTls, kTlsCert, kTlsKey, kJson, kLogLevel };
  static const option long_options[] = {
      {"listen", required_argument, nullptr, kListen},       {"port-file", required_argument, nullptr, kPortFile},
      {"connect", required_argument, nullptr, kConnect},     {"connections", required_argument, nullptr, 'k'},
      {"bytes", required_argument, nullptr, kBytes},         {"iterations", required_argument, nullptr, kIterations},
      {"reverse", no_argument, nullptr, kReverse},           {"loop", no_argument, nullptr, kLoop},
      {"segment", required_argument, nullptr, kSegment},     {"threads", required_argument, nullptr, kThreads},
      {"secret-file", required_argument, nullptr, kSecretFile}, {"tls", no_argument, nullptr, kTls},
      {"tls-cert", required_argument, nullptr, kTlsCert},    {"tls-key", required_argument, nullptr, kTlsKey},
      {"json", no_argument, nullptr, kJson},                 {"log-level", required_argument, nullptr, kLogLevel},
      {"help", no_argument, nullptr, 'h'},                   {nullptr, 0, nullptr, 0}};
  optind = 2;
  int opt;
  while ((opt = getopt_long(argc, argv, "k:h", long_options, nullptr)) != -1) {
    const std::string arg = optarg ? optarg : "";
    uint64_t size = 0;
    switch (opt) {
      case kListen: c.listen = arg; break;
      case kPortFile: c.port_file = arg; break;
      case kConnect: c.connect = arg; break;
      case 'k': {
        int k = std::atoi(arg.c_str());
        if (k < 1 || k > 64) return usage_error("--connections must be 1..64");
        c.connections = static_cast<uint16_t>(k);
        break;
      }
      case kBytes:
        if (!parse_size(arg, &c.bytes)) return usage_error("--bytes takes a size such as 256MiB");
        break;
      case kIterations:
        c.iterations = std::atoi(arg.c_str());
        if (c.iterations < 1) return usage_error("--iterations must be at least 1");
        break;
      case kReverse: c.reverse = true; break;
      case kLoop: c.loop = true; break;
      case kSegment:
        if (!parse_size(arg, &size) || size == 0 || size > (16u << 20)) return usage_error("--segment must be 1..16MiB");
        c.transport.segment_bytes = static_cast<uint32_t>(size);
        break;
      case kThreads:
        c.threads = static_cast<unsigned>(std::max(1, std::atoi(arg.c_str())));
        break;
      case kSecretFile: {
        std::ifstream f(arg);
        if (!f) return usage_error("cannot read --secret-file " + arg);
        std::getline(f, c.transport.secret);
        if (c.transport.secret.empty()) return usage_error("--secret-file " + arg + " is empty");
        break;
      }
      case kTls: c.transport.tls.enabled = true; break;
      case kTlsCert: c.transport.tls.enabled = true; c.transport.tls.cert_file = arg; break;
      case kTlsKey: c.transport.tls.enabled = true; c.transport.tls.key_file = arg; break;
      case kJson: c.json = true; break;
      case kLogLevel: {
        log::Level level;
        if (!log::parse_level(arg, &level)) return usage_error("--log-level must be debug, info, warn or error");
        log::set_level(level);
        break;
      }
      case 'h': std::fputs(kUsage, stdout); return 0;
      default: return usage_error("unknown option");
    }
  }
  if (optind < argc) return usage_error(std::string("unexpected argument ") + argv[optind]);
  signal(SIGPIPE, SIG_IGN);
  if (c.mode == "server") return run_server(c);
  if (c.connect.empty()) return usage_error("client needs --connect HOST:PORT");
  return run_client(c);
}

}  // namespace
}  // namespace longhaul::linkperf

int main(int argc, char** argv) { return longhaul::linkperf::main_impl(argc, argv); }
