// longhaul-linkperf: measures a longhaul link between two processes, like iperf3 for longhaul.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "common/mutex.hpp"
#include "linkperf_protocol.hpp"
#include "net/endpoint.hpp"
#include "tool_cli.hpp"

namespace longhaul::linkperf {
namespace {

namespace cli = longhaul::cli;

constexpr const char* kDescription =
    R"(longhaul-linkperf: measure a longhaul link (K TCP connections, optional TLS) between two processes.

Run a server on one machine and a client on another (or both on one):
  longhaul-linkperf server --listen 127.0.0.1:0 --port-file /tmp/port
  longhaul-linkperf client --connect 127.0.0.1:$(cat /tmp/port) -k 4 --bytes 256MiB --iterations 5

The client sends --bytes per iteration (or receives them with --reverse) and reports the
throughput once the server has every byte. Both sides must agree on --secret-file and TLS.
)";

struct Config {
  std::string mode;  // server or client
  std::string secret_file;
  std::string log_level = "warn";
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
  double rate_mbit = 0;  // the link's upload cap (transport.link_rate_bytes_per_s), 0: none
  net::TransportOptions transport;
};

// A size in bytes: a whole number, optionally followed by K/KiB, M/MiB or G/GiB.
bool parse_size(std::string_view text, uint64_t* out) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc()) return false;
  const std::string_view suffix(end, static_cast<size_t>(text.data() + text.size() - end));
  uint64_t mult = 1;
  if (suffix == "KiB" || suffix == "K")
    mult = 1ull << 10;
  else if (suffix == "MiB" || suffix == "M")
    mult = 1ull << 20;
  else if (suffix == "GiB" || suffix == "G")
    mult = 1ull << 30;
  else if (!suffix.empty())
    return false;
  *out = v * mult;
  return true;
}

// How --help shows a default size: 256MiB rather than 268435456.
std::string size_text(uint64_t bytes) {
  for (const auto& [unit, shift] :
       {std::pair{"GiB", 30}, std::pair{"MiB", 20}, std::pair{"KiB", 10}})
    if (bytes != 0 && bytes % (uint64_t{1} << shift) == 0)
      return fmt::format("{}{}", bytes >> shift, unit);
  return std::to_string(bytes);
}

int usage_error(const std::string& why) {
  std::fprintf(stderr, "longhaul-linkperf: %s (see --help)\n", why.c_str());
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
    MutexLock lock(mu_);
    auto& free = free_[n];
    if (free.empty()) return std::make_shared<std::vector<std::byte>>(pattern(n));
    auto b = free.back();
    free.pop_back();
    return b;
  }
  void put(std::shared_ptr<std::vector<std::byte>> b) {
    MutexLock lock(mu_);
    free_[b->size()].push_back(std::move(b));
  }

 private:
  Mutex mu_;
  std::map<size_t, std::vector<std::shared_ptr<std::vector<std::byte>>>> free_ GUARDED_BY(mu_);
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
            l2->send_control(
                encode(Message{request.command, request.op_id, static_cast<uint64_t>(s.code())}));
        };
        if (request.command == Command::kReceive)
          l->recv(request.op_id, *buffer, reply);
        else
          l->send(request.op_id, *buffer, reply);
      },
      [](const Status& why) { log::info("linkperf", "link ended: {}", why.to_string()); });
}

volatile sig_atomic_t g_stop = 0;

int run_server(const Config& c) {
  std::string host;
  uint16_t port;
  if (Status s = net::parse_host_port(c.listen, &host, &port); !s) return usage_error(s.message());
  runtime::IoRuntime io(c.threads);
  auto listener = net::Listener::create(io, host, port, c.transport);
  if (!listener) {
    std::fprintf(stderr, "longhaul-linkperf: %s\n", listener.status().to_string().c_str());
    return 1;
  }
  auto pool = std::make_shared<BufferPool>();
  Mutex mu;
  std::vector<std::shared_ptr<net::Link>> links;  // under mu
  listener.value()->start([&](std::shared_ptr<net::Link> link, net::Role) {
    serve(link, pool);
    MutexLock lock(mu);
    links.push_back(std::move(link));
  });
  if (!c.port_file.empty()) {
    const std::string tmp = c.port_file + ".tmp";
    std::ofstream(tmp) << listener.value()->port() << "\n";
    std::rename(tmp.c_str(), c.port_file.c_str());  // atomic: readers never see a partial file
  }
  std::fprintf(stderr, "longhaul-linkperf: listening on %s:%u\n", host.c_str(),
               listener.value()->port());
  signal(SIGINT, [](int) { g_stop = 1; });
  signal(SIGTERM, [](int) { g_stop = 1; });
  while (!g_stop) pause();
  listener.value()->close();
  MutexLock lock(mu);
  for (auto& l : links) l->close();
  return 0;
}

// This process's CPU time (user + system, all threads) and context switches since it started.
struct CpuUsage {
  double seconds = 0;
  long context_switches = 0;
};

CpuUsage cpu_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return {secs(u.ru_utime) + secs(u.ru_stime), u.ru_nvcsw + u.ru_nivcsw};
}

// The --json line: bench/e2e/link and bench/e2e/state read these names. `cpu` is what the client
// process spent during the timed transfers (the server's share is measured from outside).
std::string result_json(const Config& c, size_t iterations, double median, double best,
                        double elapsed, const CpuUsage& cpu, const Status& failure) {
  const auto milli = [](double x) { return std::round(x * 1000) / 1000; };
  const nlohmann::ordered_json j = {
      {"connections", c.connections},
      {"tls", c.transport.tls.enabled},
      {"bytes", c.bytes},
      {"iterations", iterations},
      {"gbps_median", milli(median)},
      {"gbps_best", milli(best)},
      {"seconds", milli(elapsed)},
      {"cpu_s", milli(cpu.seconds)},
      {"context_switches", cpu.context_switches},
      {"error", failure.is_ok() ? "" : lh_status_string(failure.code())},
  };
  return j.dump();
}

// The client's result on stdout: one JSON line with --json, else one line of text.
void print_result(const Config& c, const std::vector<double>& gbps, double elapsed,
                  const CpuUsage& cpu, const Status& failure) {
  std::vector<double> sorted = gbps;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  const double best = sorted.empty() ? 0 : sorted.back();
  if (c.json) {
    std::printf("%s\n", result_json(c, gbps.size(), median, best, elapsed, cpu, failure).c_str());
  } else {
    std::printf(
        "%zu transfers of %llu bytes over %u connections%s: median %.2f Gbit/s, best %.2f Gbit/s\n",
        gbps.size(), static_cast<unsigned long long>(c.bytes), c.connections,
        c.transport.tls.enabled ? " (TLS)" : "", median, best);
    if (!failure.is_ok()) std::printf("ended by: %s\n", failure.to_string().c_str());
  }
}

int run_client(const Config& c) {
  std::string host;
  uint16_t port;
  if (Status s = net::parse_host_port(c.connect, &host, &port); !s) return usage_error(s.message());
  runtime::IoRuntime io(c.threads);
  auto connected = net::connect_link(io, host, port, c.connections, c.transport);
  if (!connected) {
    std::fprintf(stderr, "longhaul-linkperf: %s\n", connected.status().to_string().c_str());
    return 1;
  }
  auto link = *connected;
  Mutex mu;
  CondVar cv;
  std::map<uint64_t, lh_status> replies;  // under mu
  link->start(
      [&](std::vector<std::byte> bytes) {
        Message reply;
        if (!decode(bytes, &reply)) return;
        MutexLock lock(mu);
        replies[reply.op_id] = static_cast<lh_status>(reply.value);
        cv.notify_all();
      },
      [&](const Status&) { cv.notify_all(); });

  auto buffer = pattern(c.bytes);
  std::vector<double> gbps;
  Status failure;
  const auto started = std::chrono::steady_clock::now();
  const CpuUsage cpu_before = cpu_usage();
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
      MutexLock lock(mu);
      while (!replies.contains(op) && link->failure().is_ok()) cv.wait(mu);
      if (replies.contains(op) && replies[op] != LH_OK)
        s = Status(replies[op], fmt::format("the server reports op {} failed", op));
      else if (!replies.contains(op))
        s = link->failure();
    }
    if (!s) {
      failure = s;
      break;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(static_cast<double>(c.bytes) * 8 / seconds / 1e9);
    if (!c.json && !c.loop)
      std::printf("iteration %llu: %.2f Gbit/s\n", static_cast<unsigned long long>(op),
                  gbps.back());
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const CpuUsage cpu_after = cpu_usage();
  const CpuUsage cpu{cpu_after.seconds - cpu_before.seconds,
                     cpu_after.context_switches - cpu_before.context_switches};
  link->close();
  if (!failure.is_ok() && !c.loop) {
    std::fprintf(stderr, "longhaul-linkperf: %s\n", failure.to_string().c_str());
    return 1;
  }
  print_result(c, gbps, elapsed, cpu, failure);
  return failure.is_ok() ? 0 : 1;
}

void add_flags(CLI::App& app, Config& c) {
  app.add_option("mode", c.mode, "server or client")
      ->required()
      ->check(cli::one_of({"server", "client"}));
  app.add_option("--listen", c.listen, "server: address to listen on (port 0 picks a free port)")
      ->type_name("HOST:PORT");
  app.add_option("--port-file", c.port_file, "server: write the bound port to FILE once listening")
      ->type_name("FILE");
  app.add_option("--connect", c.connect, "client: server to measure against")
      ->type_name("HOST:PORT");
  cli::add_number(app, "-k,--connections", c.connections, 1, 64,
                  "client: TCP connections in the link, 1..64");
  cli::add_parsed(app, "--bytes", c.bytes, parse_size, "a size such as 256MiB",
                  "client: payload per iteration (suffixes KiB, MiB, GiB)", size_text(c.bytes))
      ->type_name("SIZE");
  cli::add_number(app, "--iterations", c.iterations, 1, INT32_MAX,
                  "client: number of timed transfers");
  app.add_flag("--reverse", c.reverse, "client: the server sends, the client receives");
  app.add_flag("--loop", c.loop,
               "client: repeat transfers until the link fails, then report the error");
  cli::add_parsed(
      app, "--segment", c.transport.segment_bytes,
      [](std::string_view text, uint32_t* out) {
        uint64_t size = 0;
        if (!parse_size(text, &size) || size == 0 || size > (16u << 20)) return false;
        *out = static_cast<uint32_t>(size);
        return true;
      },
      "a size in 1..16MiB", "segment size for striping", size_text(c.transport.segment_bytes))
      ->type_name("SIZE");
  cli::add_number(app, "--threads", c.threads, 1, 1024, "I/O threads");
  cli::add_number(app, "--rate-mbit", c.rate_mbit, 0.0, 1e6,
                  "upload cap of the link, Mbit/s, split over its connections; 0: none");
  app.add_option("--secret-file", c.secret_file,
                 "cluster secret (first line of FILE); both sides must match")
      ->type_name("FILE");
  app.add_flag("--tls", c.transport.tls.enabled, "client: use TLS 1.3");
  app.add_option("--tls-cert", c.transport.tls.cert_file,
                 "server: enable TLS 1.3 with this certificate")
      ->type_name("FILE");
  app.add_option("--tls-key", c.transport.tls.key_file, "server: the certificate's key")
      ->type_name("FILE");
  app.add_flag("--json", c.json, "client: print the result as one JSON object");
  app.add_option("--log-level", c.log_level, "debug, info, warn, error or off")
      ->type_name("LEVEL")
      ->check(cli::one_of({"debug", "info", "warn", "error", "off"}));
}

// The flags into *c; the exit status when the program must stop now (--help, a bad flag).
std::optional<int> parse_config(int argc, char** argv, Config* c) {
  CLI::App app{kDescription, "longhaul-linkperf"};
  cli::configure(app, "", "longhaul-linkperf server|client [options]");
  add_flags(app, *c);
  if (auto exit_status = cli::parse(app, argc, argv)) return exit_status;
  if (!c->transport.tls.cert_file.empty() || !c->transport.tls.key_file.empty())
    c->transport.tls.enabled = true;
  c->transport.link_rate_bytes_per_s = static_cast<uint64_t>(c->rate_mbit * 1e6 / 8);
  if (!c->secret_file.empty()) {
    std::ifstream f(c->secret_file);
    if (!f) return cli::usage_error(app, "cannot read --secret-file " + c->secret_file);
    std::getline(f, c->transport.secret);
    if (c->transport.secret.empty())
      return cli::usage_error(app, "--secret-file " + c->secret_file + " is empty");
  }
  log::Level level;
  log::parse_level(c->log_level, &level);  // one_of() admitted only known levels
  log::set_level(level);
  if (c->mode == "client" && c->connect.empty())
    return cli::usage_error(app, "client needs --connect HOST:PORT");
  return std::nullopt;
}

int main_impl(int argc, char** argv) {
  Config c;
  if (auto exit_status = parse_config(argc, argv, &c)) return *exit_status;
  signal(SIGPIPE, SIG_IGN);
  return c.mode == "server" ? run_server(c) : run_client(c);
}

}  // namespace
}  // namespace longhaul::linkperf

int main(int argc, char** argv) {
  return longhaul::linkperf::main_impl(argc, argv);
}
