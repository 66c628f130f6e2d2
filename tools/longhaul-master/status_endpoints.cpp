#include "status_endpoints.hpp"

#include "common/metrics_text.hpp"
#include "master/status_render.hpp"

namespace longhaul::master {

Result<std::unique_ptr<ops::HttpServer>> serve_status(Master& master,
                                                      const ops::HttpOptions& options) {
  std::map<std::string, ops::HttpHandler> routes;
  routes["/"] = [] {
    return ops::HttpResponse{200, "text/html; charset=utf-8", status_page_html()};
  };
  routes["/api/status"] = [&master] {
    return ops::HttpResponse{200, "application/json", status_json(*master.status())};
  };
  routes["/metrics"] = [&master] {
    std::string text = status_metrics(*master.status());
    if (text.empty()) return ops::HttpResponse{500, "text/plain", "metrics encoder failed\n"};
    return ops::HttpResponse{200, MetricsText::kContentType, std::move(text)};
  };
  routes["/healthz"] = [] { return ops::HttpResponse{200, "text/plain", "ok\n"}; };
  return ops::HttpServer::start(options, std::move(routes));
}

}  // namespace longhaul::master
