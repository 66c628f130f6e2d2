// Reads stdin line by line on its own thread (a blocking read, so no polling) and hands each line
// to the io_context thread, where the emulator lives. stdin may be a pipe, a terminal or a file.
#pragma once

#include <functional>
#include <string>

#include <asio/io_context.hpp>

namespace longhaul::wanem {

// Starts the reader; `on_line` runs on `io` for every line. At end of input the reader stops and
// nothing else happens (the emulator keeps running). The thread is detached: it may stay blocked
// in read() until the process exits.
void start_stdin_reader(asio::io_context& io, std::function<void(std::string)> on_line);

}  // namespace longhaul::wanem
