// longhaul-wanem's packet-lab mode (--site ...).
#pragma once

#include "wanlab/lab_spec.hpp"

namespace longhaul::wanem {

// Builds the lab, prints its sites and READY, forwards until quit/SIGTERM/SIGINT or the parent's
// death, then removes every namespace it made. Returns the exit status (1: the lab could not be
// built or a device failed).
int run_packet_lab(const wanlab::LabSpec& spec);

}  // namespace longhaul::wanem
