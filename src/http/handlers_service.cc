// The service's own routes: the dashboard page, health, readiness, version, metrics, history.
#include "core/version.h"
#include "http/handlers.h"
#include "http/response.h"
#include "wire/json_writer.h"

namespace delayq::http::handlers {

HttpResponse Dashboard(Context& c, const Call&) {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                         "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'");
  r.body = c.options.dashboard_html.empty()
               ? "<!doctype html><title>delayq</title><h1>delayq</h1><p>The HTTP API is at "
                 "<a href=\"/v1/queues\">/v1/queues</a>; metrics at <a "
                 "href=\"/metrics\">/metrics</a>.</p>"
               : c.options.dashboard_html;
  return r;
}

extern const char kOpenApiJson[];  // generated from docs/openapi.yaml (src/http/CMakeLists.txt)

HttpResponse OpenApiJson(Context&, const Call&) {
  HttpResponse r = JsonResponse(200, kOpenApiJson);
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

HttpResponse Healthz(Context&, const Call&) { return JsonResponse(200, R"({"status":"ok"})"); }

HttpResponse VersionJson(Context& c, const Call&) {
  wire::JsonWriter w;
  w.BeginObject().Key("version").String(Version()).Key("commit").String(Commit());
  w.Key("store").String(c.metrics.build().store).Key("durability").String(c.metrics.build().durability);
  w.EndObject();
  return JsonResponse(200, w.Take());
}

HttpResponse Readyz(Context& c, const Call&) {
  if (!c.options.ready()) return ErrorResponse(Status::Unavailable("the store is not open yet or is shutting down"));
  Status health = c.queue.Health();
  if (!health.ok()) return ErrorResponse(health);
  return JsonResponse(200, R"({"status":"ready"})");
}

HttpResponse MetricsText(Context& c, const Call&) {
  auto stats = c.queue.ListQueues();
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = c.metrics.Render(stats.ok() ? *stats : std::vector<QueueStats>{}, stats.ok() && c.queue.Health().ok());
  return r;
}

HttpResponse HistoryJson(Context& c, const Call& call) {
  std::vector<std::string> names;
  for (const auto& [k, v] : call.target.query) {
    if (k == "queue") names.push_back(v);
  }
  return JsonResponse(200, c.history.Json(names));
}

}  // namespace delayq::http::handlers
