// The lab's event loop: epoll over the sites' TUN devices, a timerfd armed for the next delivery,
// SIGTERM/SIGINT (signalfd) and command lines on stdin. Nothing spins; an idle lab sleeps.
#pragma once

#include "common/status.hpp"
#include "wanlab/forwarder.hpp"
#include "wanlab/lab.hpp"

namespace longhaul::wanlab {

// Runs until `quit`, SIGTERM or SIGINT (ok), or until a device fails (the error). Answers go to
// stdout, one flushed line each. End of stdin does not stop the lab.
Status run_lab_loop(Lab& lab, Forwarder& forwarder);

}  // namespace longhaul::wanlab
