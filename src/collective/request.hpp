// An all-reduce request before it becomes an operation: whether it is valid, which schedule every
// member of the group will run, and whether this member has the links that schedule needs.
#pragma once

#include "collective/allreduce_spec.hpp"
#include "collective/gather_spec.hpp"
#include "collective/ring_view.hpp"
#include "common/status.hpp"

namespace longhaul::collective {

// OK, or why the request is invalid (a typed error, before anything is sent).
Status validate(const AllReduceSpec& spec, const RingView& view);
Status validate(const GatherSpec& spec, const RingView& view);

// The schedule `spec.schedule` resolves to. Every member must choose the same one, so the choice
// rests on what they share (the spec, the group's size, whether every member was asked to link to
// every other), never on which links happen to be up here.
Schedule choose_schedule(const AllReduceSpec& spec, const RingView& view);
Schedule choose_schedule(const GatherSpec& spec, const RingView& view);

// OK when this member has every link `schedule` needs, else why not: LH_ERR_PEER_LOST for a link
// that should be there and is not, LH_ERR_UNSUPPORTED for the direct schedule in a group that is
// not a full mesh.
Status check_links(Schedule schedule, const RingView& view);

}  // namespace longhaul::collective
