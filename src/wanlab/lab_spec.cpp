#include "wanlab/lab_spec.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace longhaul::wanlab {

Status check_site_name(std::string_view name) {
  const bool ok =
      !name.empty() && name.size() <= 10 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
  if (!ok)
    return invalid_argument(
        fmt::format("site name '{}' must be 1..10 characters of a-z, 0-9, _", name));
  return Status::ok();
}

Status apply_setting(const PathSetting& setting, PathShape* shape) {
  for (const auto& [key, value] : setting.fields)
    LH_RETURN_IF_ERROR(set_path_field(shape, key, value));
  return Status::ok();
}

Status parse_path_setting(std::string_view text, PathSetting* out) {
  const size_t comma = text.find(',');
  const std::string_view ends = text.substr(0, comma);
  const size_t sep = ends.find_first_of("->");
  if (sep == std::string_view::npos)
    return invalid_argument(fmt::format("path '{}' needs A-B or A>B before its settings", text));
  out->from = std::string(ends.substr(0, sep));
  out->to = std::string(ends.substr(sep + 1));
  out->both_directions = ends[sep] == '-';
  LH_RETURN_IF_ERROR(check_site_name(out->from));
  LH_RETURN_IF_ERROR(check_site_name(out->to));
  if (out->from == out->to)
    return invalid_argument(fmt::format("path '{}' joins a site to itself", ends));
  std::string_view rest = comma == std::string_view::npos ? "" : text.substr(comma + 1);
  PathShape scratch;
  while (!rest.empty()) {
    const size_t next = rest.find(',');
    const std::string_view item = rest.substr(0, next);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return invalid_argument(fmt::format("path setting '{}' needs key=value", item));
    out->fields.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    LH_RETURN_IF_ERROR(
        set_path_field(&scratch, out->fields.back().first, out->fields.back().second));
    rest = next == std::string_view::npos ? "" : rest.substr(next + 1);
  }
  return Status::ok();
}

Status check_lab_spec(const LabSpec& spec) {
  if (spec.sites.size() < 2 || spec.sites.size() > 250)
    return invalid_argument(fmt::format("a lab needs 2..250 sites, got {}", spec.sites.size()));
  for (size_t i = 0; i < spec.sites.size(); ++i) {
    LH_RETURN_IF_ERROR(check_site_name(spec.sites[i]));
    for (size_t j = 0; j < i; ++j)
      if (spec.sites[i] == spec.sites[j])
        return invalid_argument(fmt::format("site {} is given twice", spec.sites[i]));
  }
  const auto known = [&](const std::string& s) {
    return std::find(spec.sites.begin(), spec.sites.end(), s) != spec.sites.end();
  };
  for (const PathSetting& p : spec.paths)
    if (!known(p.from) || !known(p.to))
      return invalid_argument(fmt::format("path {}{}{} names a site no --site defines", p.from,
                                          p.both_directions ? "-" : ">", p.to));
  if (spec.mtu < 576 || spec.mtu > 65000)
    return invalid_argument(fmt::format("mtu must be 576..65000, got {}", spec.mtu));
  return Status::ok();
}

}  // namespace longhaul::wanlab
