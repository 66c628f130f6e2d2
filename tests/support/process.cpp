#include "process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace longhaul::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "longhaul-it-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

Child::Child(std::vector<std::string> argv, std::string stderr_path)
    : stderr_path_(std::move(stderr_path)) {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    throw std::runtime_error("cannot start " + argv[0]);
  }
  stdin_fd_ = in_pipe[1];
  reader_ = std::thread([this, fd = out_pipe[0]] { read_stdout(fd); });
}

Child::~Child() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    wait_exit(std::chrono::seconds(30));
  }
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (reader_.joinable()) reader_.join();
}

void Child::read_stdout(int fd) {
  std::string partial;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) {
      {
        std::lock_guard lock(mu_);
        stdout_closed_ = true;
      }
      cv_.notify_all();
      break;
    }
    partial.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      {
        std::lock_guard lock(mu_);
        lines_.push_back(partial.substr(0, nl));
      }
      cv_.notify_all();
      partial.erase(0, nl + 1);
    }
  }
  close(fd);
}

void Child::send(const std::string& line) {
  if (stdin_fd_ < 0) return;
  const std::string text = line + "\n";
  signal(SIGPIPE, SIG_IGN);
  (void)!write(stdin_fd_, text.data(), text.size());
}

void Child::close_stdin() {
  if (stdin_fd_ < 0) return;
  close(stdin_fd_);
  stdin_fd_ = -1;
}

void Child::kill(int signal) {
  if (running()) ::kill(pid_, signal);
}

bool Child::running() {
  if (exit_code_) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return r == 0;
}

std::optional<int> Child::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The process is gone, but the reader may not have drained the pipe yet: a test that checks
  // the last line right after the exit must see it. (A descendant still holding the pipe open
  // would delay EOF; then give up at the deadline and return what is known.)
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return stdout_closed_; });
  return exit_code_;
}

std::vector<std::string> Child::lines() const {
  std::lock_guard lock(mu_);
  return lines_;
}

std::optional<std::string> Child::wait_line(const std::function<bool(const std::string&)>& pred,
                                            std::chrono::milliseconds timeout, size_t from) {
  std::unique_lock lock(mu_);
  std::optional<std::string> found;
  cv_.wait_for(lock, timeout, [&] {
    for (size_t i = from; i < lines_.size(); ++i)
      if (pred(lines_[i])) {
        found = lines_[i];
        return true;
      }
    return false;
  });
  return found;
}

std::string Child::last_line(const std::string& prefix) const {
  std::lock_guard lock(mu_);
  for (auto it = lines_.rbegin(); it != lines_.rend(); ++it)
    if (it->rfind(prefix, 0) == 0) return *it;
  return "";
}

std::string Child::stderr_text() const {
  std::ifstream in(stderr_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int read_port_file(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream f(path);
    int port = 0;
    if (f >> port && port > 0) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(stat.substr(paren + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace longhaul::testing
