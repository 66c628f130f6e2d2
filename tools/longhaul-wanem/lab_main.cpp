#include "lab_main.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "common/log.hpp"
#include "wanlab/forwarder.hpp"
#include "wanlab/lab.hpp"
#include "wanlab/lab_loop.hpp"
#include "wanlab/netns.hpp"

namespace longhaul::wanem {

int run_packet_lab(const wanlab::LabSpec& spec) {
  // SIGTERM/SIGINT wait (blocked) until the loop reads them, so a signal during set-up still
  // ends in the clean-up below; the parent's death sends SIGTERM, so a lab never outlives the
  // test or benchmark that started it.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() == 1) {  // the parent died before PR_SET_PDEATHSIG took hold
    std::cerr << "longhaul-wanem: the process that started the lab is gone; not building it\n";
    return 1;
  }
  if (int stale = wanlab::sweep_stale_namespaces(); stale > 0)
    log::info("wanlab", "removed {} namespaces of labs that died", stale);
  auto lab = wanlab::Lab::build(spec, ::getpid());
  if (!lab) {
    std::cerr << "longhaul-wanem: " << lab.status().message() << "\n";
    return 1;
  }
  for (const wanlab::Site& site : (*lab)->sites())
    std::printf("SITE %s %s %s\n", site.name.c_str(), site.netns.c_str(), site.address().c_str());
  std::printf("READY\n");
  std::fflush(stdout);
  wanlab::Forwarder forwarder(**lab, spec);
  if (Status s = wanlab::run_lab_loop(**lab, forwarder); !s) {
    std::cerr << "longhaul-wanem: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace longhaul::wanem
