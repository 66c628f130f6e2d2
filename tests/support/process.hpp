// Child processes for tests (unit and integration): spawned with piped stdin/stdout, stderr to a
// log file, and always killed by their own pid and reaped when the guard goes away, even when a
// test fails.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace longhaul::testing {

// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class Child {
 public:
  // Starts argv[0] with the given arguments; stderr goes to `stderr_path`.
  Child(std::vector<std::string> argv, std::string stderr_path);
  // SIGKILLs the child if it still runs, reaps it, joins the reader.
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Writes one line to the child's stdin (ignored once it has exited).
  void send(const std::string& line);
  // Closes the child's stdin (it reads end of input). Idempotent.
  void close_stdin();
  void kill(int signal);
  // Waits for the child to exit and for its stdout to be read to the end (so lines() and
  // last_line() hold everything it printed); its exit code (or 128 + signal), or nullopt on
  // timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  bool running();

  // Every stdout line so far.
  std::vector<std::string> lines() const;
  // Waits until some stdout line (from index `from` on) satisfies `pred`; returns it.
  std::optional<std::string> wait_line(const std::function<bool(const std::string&)>& pred,
                                       std::chrono::milliseconds timeout, size_t from = 0);
  // The last line starting with `prefix`, or "".
  std::string last_line(const std::string& prefix) const;
  // The child's stderr so far (for failure messages).
  std::string stderr_text() const;

 private:
  void read_stdout(int fd);

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  std::string stderr_path_;
  std::optional<int> exit_code_;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool stdout_closed_ = false;  // the reader saw EOF: lines_ is complete
};

// Waits until `path` holds a port number written by a child (atomically renamed into place);
// -1 on timeout.
int read_port_file(const std::string& path,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));

// CPU time (user + system, all threads) a running process has used so far, in seconds
// (/proc/<pid>/stat); 0 if it cannot be read.
double cpu_seconds(pid_t pid);

}  // namespace longhaul::testing
