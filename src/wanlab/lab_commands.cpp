#include "wanlab/lab_commands.hpp"

#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "wanlab/lab_spec.hpp"

namespace longhaul::wanlab {
namespace {

size_t site_index(Lab& lab, const std::string& name) {
  for (size_t i = 0; i < lab.sites().size(); ++i)
    if (lab.sites()[i].name == name) return i;
  return std::string::npos;
}

// The directions a path argument names: A>B one, A-B both.
Result<std::vector<std::pair<size_t, size_t>>> directions(Lab& lab, const std::string& text) {
  PathSetting setting;
  LH_RETURN_IF_ERROR(parse_path_setting(text, &setting));
  const size_t a = site_index(lab, setting.from), b = site_index(lab, setting.to);
  if (a == std::string::npos || b == std::string::npos)
    return invalid_argument(fmt::format("path {} names a site the lab does not have", text));
  std::vector<std::pair<size_t, size_t>> out{{a, b}};
  if (setting.both_directions) out.emplace_back(b, a);
  return out;
}

std::string stats_line(Forwarder& f, size_t from, size_t to, Lab& lab) {
  const PathModel& p = f.path(from, to);
  const PathCounters& c = p.counters();
  return fmt::format("OK STATS {}>{} packets={} bytes={} lost={} queue_dropped={} blackholed={} {}",
                     lab.sites()[from].name, lab.sites()[to].name, c.packets, c.bytes, c.lost,
                     c.queue_dropped, c.blackholed, describe(p.shape()));
}

std::string counters_line(const Forwarder& f) {
  const ForwarderCounters& c = f.counters();
  return fmt::format(
      "OK COUNTERS frames_read={} frames_written={} bytes_written={} unroutable={} overflow={} "
      "write_errors={} queued_bytes={}",
      c.frames_read, c.frames_written, c.bytes_written, c.unroutable, c.overflow, c.write_errors,
      f.queued_bytes());
}

Status set_fields(Forwarder& f, const std::vector<std::pair<size_t, size_t>>& dirs,
                  const std::vector<std::string>& pairs) {
  PathShape checked = f.path(dirs[0].first, dirs[0].second).shape();
  PathSetting setting;
  for (const std::string& kv : pairs) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return invalid_argument(fmt::format("'{}' needs key=value", kv));
    setting.fields.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  LH_RETURN_IF_ERROR(apply_setting(setting, &checked));  // all checked before any is applied
  for (const auto& [from, to] : dirs) {
    PathShape shape = f.path(from, to).shape();
    (void)apply_setting(setting, &shape);
    f.path(from, to).set_shape(shape);
  }
  return Status::ok();
}

}  // namespace

LabReply execute_lab_command(Forwarder& f, Lab& lab, const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return {};
  const std::string& cmd = words[0];
  if (cmd == "quit") return {"OK QUIT", true};
  if (cmd == "counters") return {counters_line(f)};
  const bool known = cmd == "set" || cmd == "blackhole" || cmd == "heal" || cmd == "stats";
  if (!known)
    return {fmt::format(
        "ERR unknown command '{}' (known: set, blackhole, heal, stats, counters, quit)", cmd)};
  if (words.size() < 2) return {fmt::format("ERR {} needs a path A-B or A>B", cmd)};
  auto dirs = directions(lab, words[1]);
  if (!dirs) return {"ERR " + dirs.status().message()};
  if (cmd == "stats") return {stats_line(f, dirs->front().first, dirs->front().second, lab)};
  if (cmd == "set") {
    if (Status s = set_fields(f, *dirs, {words.begin() + 2, words.end()}); !s)
      return {"ERR " + s.message()};
    return {fmt::format("OK SET {} {}", words[1],
                        describe(f.path(dirs->front().first, dirs->front().second).shape()))};
  }
  for (const auto& [from, to] : *dirs) f.path(from, to).set_blackhole(cmd == "blackhole");
  return {fmt::format("OK {} {}", cmd == "blackhole" ? "BLACKHOLE" : "HEAL", words[1])};
}

}  // namespace longhaul::wanlab
