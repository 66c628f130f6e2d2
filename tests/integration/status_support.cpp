#include "status_support.hpp"

#include <httplib.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace longhaul::testing {

std::optional<std::string> http_get(uint16_t port, const std::string& path,
                                    std::chrono::seconds timeout) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(timeout.count());
  client.set_read_timeout(timeout.count());
  auto r = client.Get(path.c_str());
  if (!r || r->status != 200) return std::nullopt;
  return r->body;
}

std::optional<nlohmann::json> status_json(uint16_t port) {
  auto body = http_get(port, "/api/status");
  if (!body) return std::nullopt;
  auto j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

namespace {

// The chromium binary on PATH (posix_spawn does not search it); "chromium" when none is found,
// so the spawn fails with a message naming it.
std::string chromium_binary() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/chromium";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "chromium";
}

// Chromium's flags for a loaded CI machine as root: no sandbox (it refuses to run as root with
// one), no GPU, /tmp instead of a small /dev/shm, a profile of its own.
std::vector<std::string> chromium_argv(const std::string& url, const TempDir& dir,
                                       std::chrono::milliseconds budget,
                                       const std::string& action) {
  return {chromium_binary(),
          "--headless=new",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-dev-shm-usage",
          "--no-first-run",
          "--hide-scrollbars",
          "--user-data-dir=" + dir.path() + "/chromium-profile",
          "--window-size=1400,2200",
          "--virtual-time-budget=" + std::to_string(budget.count()),
          action,
          url};
}

}  // namespace

RenderedPage render_in_chromium(const std::string& url, const TempDir& dir,
                                std::chrono::milliseconds budget) {
  RenderedPage page;
  page.screenshot = dir.path() + "/status_page.png";
  {
    Child dump(chromium_argv(url, dir, budget, "--dump-dom"), dir.path() + "/chromium-dom.log");
    if (dump.wait_exit(std::chrono::seconds(120)) != 0) {
      page.error = "chromium --dump-dom failed: " + dump.stderr_text();
      return page;
    }
    for (const auto& line : dump.lines()) page.dom += line + "\n";
  }
  Child shot(chromium_argv(url, dir, budget, "--screenshot=" + page.screenshot),
             dir.path() + "/chromium-shot.log");
  if (shot.wait_exit(std::chrono::seconds(120)) != 0 || !std::filesystem::exists(page.screenshot))
    page.error = "chromium --screenshot failed: " + shot.stderr_text();
  return page;
}

}  // namespace longhaul::testing
