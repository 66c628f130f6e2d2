#include "wanlab/lab_loop.hpp"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "wanlab/lab_commands.hpp"

namespace longhaul::wanlab {
namespace {

constexpr uint64_t kTimerTag = UINT64_MAX;
constexpr uint64_t kSignalTag = UINT64_MAX - 1;
constexpr uint64_t kStdinTag = UINT64_MAX - 2;

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void say(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// Owns the loop's descriptors.
struct Fds {
  int epoll = -1, timer = -1, signals = -1;
  ~Fds() {
    for (int fd : {epoll, timer, signals})
      if (fd >= 0) ::close(fd);
  }
};

Status watch(int epoll, int fd, uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) != 0)
    return io_error(fmt::format("epoll_ctl: {}", std::strerror(errno)));
  return Status::ok();
}

Status open_fds(Lab& lab, Fds* fds) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  fds->epoll = ::epoll_create1(EPOLL_CLOEXEC);
  fds->timer = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  fds->signals = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fds->epoll < 0 || fds->timer < 0 || fds->signals < 0)
    return io_error(fmt::format("epoll/timerfd/signalfd: {}", std::strerror(errno)));
  LH_RETURN_IF_ERROR(watch(fds->epoll, fds->timer, kTimerTag));
  LH_RETURN_IF_ERROR(watch(fds->epoll, fds->signals, kSignalTag));
  for (size_t i = 0; i < lab.sites().size(); ++i)
    LH_RETURN_IF_ERROR(watch(fds->epoll, lab.sites()[i].tun.fd(), i));
  // stdin may be /dev/null or a file (epoll refuses those): then there are no commands.
  (void)watch(fds->epoll, STDIN_FILENO, kStdinTag);
  return Status::ok();
}

// Arms the timer for the next delivery (an absolute time, so a late wake-up does not add up).
void arm(int timer, std::optional<int64_t> due, std::optional<int64_t>* armed) {
  if (due == *armed) return;
  itimerspec spec{};
  if (due) {
    const int64_t t = std::max<int64_t>(*due, 1);
    spec.it_value.tv_sec = t / 1'000'000'000;
    spec.it_value.tv_nsec = t % 1'000'000'000;
  }
  ::timerfd_settime(timer, TFD_TIMER_ABSTIME, &spec, nullptr);
  *armed = due;
}

// Reads what stdin has; runs every whole line. False at end of stdin (no more commands).
bool read_commands(Lab& lab, Forwarder& f, std::string* pending, bool* quit) {
  char buf[4096];
  const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
  if (n <= 0) return n < 0 && (errno == EAGAIN || errno == EINTR);
  pending->append(buf, static_cast<size_t>(n));
  for (size_t eol; !*quit && (eol = pending->find('\n')) != std::string::npos;) {
    const LabReply reply = execute_lab_command(f, lab, pending->substr(0, eol));
    pending->erase(0, eol + 1);
    if (!reply.line.empty()) say(reply.line);
    *quit = reply.quit;
  }
  return true;
}

}  // namespace

Status run_lab_loop(Lab& lab, Forwarder& f) {
  Fds fds;
  LH_RETURN_IF_ERROR(open_fds(lab, &fds));
  std::optional<int64_t> armed;
  std::string pending;
  bool quit = false;
  epoll_event events[64];
  while (!quit) {
    const int n = ::epoll_wait(fds.epoll, events, 64, -1);
    if (n < 0 && errno != EINTR)
      return io_error(fmt::format("epoll_wait: {}", std::strerror(errno)));
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kTimerTag) {
        uint64_t expirations;
        (void)!::read(fds.timer, &expirations, sizeof expirations);
      } else if (tag == kSignalTag) {
        quit = true;
      } else if (tag == kStdinTag) {
        if (!read_commands(lab, f, &pending, &quit))
          ::epoll_ctl(fds.epoll, EPOLL_CTL_DEL, STDIN_FILENO, nullptr);
      } else if (!f.read_site(tag, now_ns())) {
        return io_error(fmt::format("site {}: TUN device failed: {}", lab.sites()[tag].name,
                                    std::strerror(errno)));
      }
    }
    f.deliver_due(now_ns());
    arm(fds.timer, f.next_due(), &armed);
  }
  return Status::ok();
}

}  // namespace longhaul::wanlab
