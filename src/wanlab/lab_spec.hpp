// The text form of a packet lab: its sites and the shape of the paths between them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "wanlab/path_shape.hpp"

namespace longhaul::wanlab {

// One path setting from the command line: `A-B,key=value...` (both directions) or
// `A>B,key=value...` (packets from A to B only). Only the keys given are applied, on top of the
// lab's defaults, in the order the settings come.
struct PathSetting {
  std::string from, to;
  bool both_directions = true;
  std::vector<std::pair<std::string, std::string>> fields;
};

struct LabSpec {
  std::vector<std::string> sites;  // each becomes network namespace lhw-<pid>-<site>
  PathShape defaults;              // every path not named by a setting
  std::vector<PathSetting> paths;
  int mtu = 1500;
  bool offload = true;  // TSO/GSO super-packets through the TUN devices (see docs/wanlab.md)
  uint64_t seed = 1;
};

// Site names: 1..10 characters of [a-z0-9_], so that namespace and interface names stay short.
Status check_site_name(std::string_view name);
// `A-B,key=value...` or `A>B,key=value...`; keys are checked against PathShape's.
Status parse_path_setting(std::string_view text, PathSetting* out);
// The site names exist, are unique, and there are 2..250 of them.
Status check_lab_spec(const LabSpec& spec);
// Applies `setting`'s fields to `shape`.
Status apply_setting(const PathSetting& setting, PathShape* shape);

}  // namespace longhaul::wanlab
