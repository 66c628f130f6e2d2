// Helpers for the status page tests: the master's HTTP endpoints read with cpp-httplib, and
// headless Chromium (Debian's chromium, installed by scripts/setup.sh) loading the page.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "process.hpp"

namespace longhaul::testing {

// GET http://127.0.0.1:port/path; nullopt unless it answered 200 within the timeout.
std::optional<std::string> http_get(uint16_t port, const std::string& path,
                                    std::chrono::seconds timeout = std::chrono::seconds(10));
std::optional<nlohmann::json> status_json(uint16_t port);

// What headless Chromium made of a page: the DOM after its scripts ran, and a screenshot.
struct RenderedPage {
  std::string dom;
  std::string screenshot;  // path of the PNG
  std::string error;       // empty on success
};
// Loads `url` in headless Chromium twice (once for the DOM, once for the screenshot, each given
// `budget` of virtual time for the page's scripts) with its profile in `dir`.
RenderedPage render_in_chromium(const std::string& url, const TempDir& dir,
                                std::chrono::milliseconds budget);

}  // namespace longhaul::testing
