#include "wanlab/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

extern char** environ;

namespace longhaul::wanlab {
namespace {

constexpr const char* kNetnsDir = "/run/netns";

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

Status run_command(const std::vector<std::string>& argv) {
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    return io_error(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(err_pipe[1]);
  const std::string what = fmt::format("{}", fmt::join(argv, " "));
  if (rc != 0) {
    ::close(err_pipe[0]);
    return io_error(fmt::format("{}: {}", what, std::strerror(rc)));
  }
  std::string errors = read_all(err_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::ok();
  while (!errors.empty() && errors.back() == '\n') errors.pop_back();
  return io_error(
      fmt::format("{}: exit {}: {}", what, WIFEXITED(status) ? WEXITSTATUS(status) : -1, errors));
}

std::string namespace_name(int pid, const std::string& site) {
  return fmt::format("lhw-{}-{}", pid, site);
}

Status create_namespace(const std::string& name) {
  LH_RETURN_IF_ERROR(run_command({"ip", "netns", "add", name}));
  return run_command({"ip", "-n", name, "link", "set", "lo", "up"});
}

void delete_namespace(const std::string& name) {
  // The result is not needed: a namespace that cannot be deleted is gone already, or is held by a
  // process still inside it, which `ip netns list` then shows to whoever looks.
  (void)run_command({"ip", "netns", "del", name});
}

int sweep_stale_namespaces() {
  std::error_code ec;
  int removed = 0;
  static const std::regex kOurs("lhw-([0-9]+)-[a-z0-9_]+");
  for (const auto& entry : std::filesystem::directory_iterator(kNetnsDir, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, kOurs)) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(m[1].str()));
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    delete_namespace(name);
    ++removed;
  }
  return removed;
}

Status in_namespace(const std::string& name, const std::function<Status()>& fn) {
  const int home = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) return io_error(fmt::format("open own netns: {}", std::strerror(errno)));
  const std::string path = fmt::format("{}/{}", kNetnsDir, name);
  const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    ::close(home);
    return io_error(fmt::format("open {}: {}", path, std::strerror(errno)));
  }
  Status result = ::setns(target, CLONE_NEWNET) == 0
                      ? fn()
                      : io_error(fmt::format("setns {}: {}", name, std::strerror(errno)));
  ::close(target);
  if (::setns(home, CLONE_NEWNET) != 0 && result)
    result =
        internal_error(fmt::format("cannot return from netns {}: {}", name, std::strerror(errno)));
  ::close(home);
  return result;
}

}  // namespace longhaul::wanlab
