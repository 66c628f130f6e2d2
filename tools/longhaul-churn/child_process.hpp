// A child process supervised on a libuv loop: spawned with its stdout on a pipe (delivered line by
// line), its stderr appended to a file, and optionally its stdin on a pipe. Signals go to its own
// pid only. The process handle reaps it (libuv's SIGCHLD handling) and reports how it ended.
//
// Lifetime: the object must outlive its handles; it is kept until the loop ends (see
// ChurnRun::shutdown), and its handles are closed once the process exited and its stdout ended.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace longhaul_churn {

class ChildProcess {
 public:
  using LineHandler = std::function<void(const std::string& line)>;
  // exit_status is the exit code, or -1 if a signal ended it (term_signal then says which).
  // Called once the process has exited and its stdout has ended (every line was delivered).
  using ExitHandler = std::function<void(int64_t exit_status, int term_signal)>;

  // Starts argv[0] (a path) with argv. On failure returns null and sets *error.
  static std::unique_ptr<ChildProcess> spawn(uv_loop_t* loop, const std::vector<std::string>& argv,
                                             const std::string& stderr_path, bool with_stdin,
                                             LineHandler on_line, ExitHandler on_exit,
                                             std::string* error);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return !exited_; }
  // Sends `signal` to this child's pid (nothing once it has exited). 0 or a negative errno.
  int send_signal(int signal);
  // Writes one line to its stdin (needs with_stdin).
  void write_line(const std::string& line);

 private:
  ChildProcess() = default;
  static void on_exit_cb(uv_process_t* handle, int64_t exit_status, int term_signal);
  static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  void maybe_close();

  uv_process_t process_{};
  uv_pipe_t out_{};
  uv_pipe_t in_{};
  bool has_stdin_ = false;
  bool exited_ = false;
  bool out_ended_ = false;
  bool closed_ = false;
  int64_t exit_status_ = 0;
  int term_signal_ = 0;
  pid_t pid_ = -1;
  std::string partial_;
  char buffer_[65536];
  LineHandler on_line_;
  ExitHandler on_exit_;
};

}  // namespace longhaul_churn
