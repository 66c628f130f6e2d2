// The rules that relate a control message's fields to each other (control_messages_rules.cpp),
// for decode_control, which checks them once a message is read whole.
#pragma once

#include "common/status.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::wire {

// OK, or LH_ERR_PROTOCOL naming the first rule `m` breaks.
Status check_rules(const ControlMessage& m);

}  // namespace longhaul::wire
