// longhaul-wanem: a userspace WAN emulator for testing longhaul over bad networks: a TCP proxy
// (routes, faults) or, with --site, a packet-level lab of network namespaces (docs/wanlab.md).
#include <signal.h>

#include <cstdio>
#include <iostream>

#include <asio/io_context.hpp>
#include <asio/signal_set.hpp>

#include "cli_flags.hpp"
#include "common/log.hpp"
#include "lab_main.hpp"
#include "stdin_lines.hpp"
#include "wanem/commands.hpp"
#include "wanem/emulator.hpp"
#include "wanem/schedule.hpp"

namespace {

using namespace longhaul::wanem;

// Every stdout line is a whole protocol line, flushed at once so a supervising process sees it.
void say(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CliFlags flags;
  if (auto exit_status = parse_cli_flags(argc, argv, &flags)) return *exit_status;
  longhaul::log::Level level;
  longhaul::log::parse_level(flags.log_level, &level);  // the flags admit only known levels
  longhaul::log::set_level(level);
  ::signal(SIGPIPE, SIG_IGN);  // a vanished endpoint is an error code on write, not a signal
  if (flags.lab_mode) return run_packet_lab(flags.lab);

  asio::io_context io(1);
  Emulator emulator(io, flags.options);
  for (const RouteSpec& spec : flags.routes) {
    auto route = emulator.add_route(spec);
    if (!route) {
      std::cerr << "longhaul-wanem: " << route.status().message() << "\n";
      return 1;
    }
    say("ROUTE " + spec.name + " " + std::to_string((*route)->port()));
  }
  say("READY");
  arm_schedule(io, emulator, flags.schedule);

  bool stopping = false;
  const auto stop = [&] {
    if (stopping) return;
    stopping = true;
    emulator.shutdown();
    io.stop();
  };
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const asio::error_code& ec, int) {
    if (!ec) stop();
  });
  start_stdin_reader(io, [&](const std::string& line) {
    if (stopping) return;
    CommandResult result = execute_command(emulator, line);
    if (!result.reply.empty()) say(result.reply);
    if (result.quit) stop();
  });
  io.run();
  return 0;
}
