#include "peer/node_identity.hpp"

#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#include "common/parse_number.hpp"
#include "wire/control_messages.hpp"

namespace longhaul::peer {
namespace {

std::optional<uint32_t> env_number(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  uint64_t value = 0;
  if (!parse_u64(text, 0, UINT32_MAX, &value)) return std::nullopt;
  return static_cast<uint32_t>(value);
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

std::optional<NodeIdentity> node_from_environment() {
  const auto rail = env_number("LOCAL_RANK");
  const auto rails = env_number("LOCAL_WORLD_SIZE");
  if (!rail || !rails) return std::nullopt;
  NodeIdentity id;
  const char* group_rank = std::getenv("GROUP_RANK");
  id.node = group_rank && *group_rank ? std::string(group_rank) : host_name();
  id.node = id.node.substr(0, wire::kMaxNodeNameBytes);
  id.rail = *rail;
  id.rails = *rails;
  return id;
}

Status validate_node(const CommunicatorOptions& o) {
  if (o.rails == 0 || o.rails > wire::kMaxRails)
    return invalid_argument(
        fmt::format("node_rails must be 1..{}, got {}", wire::kMaxRails, o.rails));
  if (o.rail >= o.rails)
    return invalid_argument(fmt::format("node_rail {} out of range: the node has {} rails (0..{})",
                                        o.rail, o.rails, o.rails - 1));
  if (o.node.empty() && o.rails > 1)
    return invalid_argument(
        fmt::format("node_rails {} needs a node id (lh_comm_options.node)", o.rails));
  if (o.node.size() > wire::kMaxNodeNameBytes)
    return invalid_argument(
        fmt::format("node id of {} bytes (at most {})", o.node.size(), wire::kMaxNodeNameBytes));
  return Status::ok();
}

}  // namespace longhaul::peer
