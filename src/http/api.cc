#include "http/api.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/nearest.h"
#include "core/trace_context.h"
#include "http/guard.h"
#include "http/response.h"
#include "http/routes.h"
#include "http/target.h"

namespace delayq::http {

Api::Api(Queue& queue, ApiOptions options) : queue_(queue), options_(std::move(options)), metrics_(options_.build) {
  for (std::string& host : options_.allowed_hosts) host = Lower(host);  // host names ignore case
}

namespace {

// What the access log says of a request: "GET /v1/queues/q" before the status and the time, and
// " trace=<trace id>" after them when the request carries a valid W3C traceparent.
struct AccessLogLine {
  std::string request, trace;
};

AccessLogLine AccessLogOf(const HttpRequest& request) {
  AccessLogLine line{fmt::format("{} {}", request.method.substr(0, 16), request.target.substr(0, 300)), ""};
  if (auto trace = TraceIdOf(request.traceparent)) line.trace = fmt::format(" trace={}", *trace);
  return line;
}

}  // namespace

std::optional<HttpResponse> Api::Admit(const HttpRequest& head) const {
  if (auto refused = RefuseBrowserAttack(head, options_.allowed_hosts)) return refused;
  return RefuseUnauthenticated(head, Target::Parse(head.target), options_.auth_token);
}

std::function<void()> Api::Handle(HttpRequest request, Reply reply) {
  const auto started = std::chrono::steady_clock::now();
  const Target target = Target::Parse(request.target);
  RouteMatch match = MatchRoute(request.method, target.segments);
  // Answers through `reply`, once, recording the request's latency under its route.
  auto observed = std::make_shared<Reply>(std::move(reply));
  AccessLogLine logged;  // only with the access log
  if (options_.access_log) logged = AccessLogOf(request);
  auto finish = [this, started, observed, route = match.route, logged](HttpResponse response) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    metrics_.Observe(route, response.status, seconds);
    if (!logged.request.empty()) {
      spdlog::info("{} {} {:.3f} ms{}", logged.request, response.status, seconds * 1e3, logged.trace);
    }
    (*observed)(std::move(response));
  };
  auto refuse = [&](HttpResponse response) {
    metrics_.Observe(kNoRoute, response.status, 0);
    (*observed)(std::move(response));
    return std::function<void()>();
  };
  if (auto refused = RefuseBrowserAttack(request, options_.allowed_hosts)) return refuse(std::move(*refused));
  if (auto refused = RefuseUnauthenticated(request, target, options_.auth_token)) return refuse(std::move(*refused));

  if (match.route == kNoRoute) {
    const std::string shown = request.target.substr(0, 200);
    if (!match.allow.empty()) {
      HttpResponse r = ErrorResponse(
          405, "method_not_allowed",
          fmt::format("{} is not allowed on {}; allowed: {}", request.method.substr(0, 16), shown, match.allow));
      r.headers.emplace_back("Allow", match.allow);
      finish(std::move(r));
      return {};
    }
    const bool under_api = target.segments.size() >= 2 && target.segments[0] == "v1" && target.segments[1] == "queues";
    finish(ErrorResponse(404, "not_found",
                         under_api ? fmt::format("no such route: {}", shown)
                                   : fmt::format("no such route: {}; the API is under /v1/queues", shown)));
    return {};
  }
  Context context{queue_, options_, metrics_, history_, streams_};
  const RouteSpec& route = Routes()[match.route];
  const std::vector<std::string_view> known = QueryParams(route);
  for (size_t i = 0; i < target.query.size(); ++i) {
    const std::string& name = target.query[i].first;
    const bool again = std::any_of(target.query.begin(), target.query.begin() + static_cast<std::ptrdiff_t>(i),
                                   [&](const auto& earlier) { return earlier.first == name; });
    if (again && !Repeatable(route, name)) {
      finish(ErrorResponse(400, "invalid_argument",
                           fmt::format("query parameter \"{}\" is given twice; give it once", name.substr(0, 64))));
      return {};
    }
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string shown = name.substr(0, 64);
    std::string hint = DidYouMean(shown, known);
    if (hint.empty()) {
      hint = known.empty() ? fmt::format("; {} {} takes none", route.method, route.pattern)
                           : fmt::format("; it takes {}", fmt::join(known, ", "));
    }
    finish(ErrorResponse(400, "invalid_argument", fmt::format("unknown query parameter \"{}\"{}", shown, hint)));
    return {};
  }
  const Call call{request, target, std::move(match.params)};
  if (route.async) return route.async(context, call, std::move(finish));
  finish(route.handler(context, call));
  return {};
}

std::function<void()> Api::HandleMonitoring(HttpRequest request, Reply reply) {
  const auto started = std::chrono::steady_clock::now();
  const Target target = Target::Parse(request.target);
  RouteMatch match = MatchRoute(request.method, target.segments);
  static constexpr std::string_view kServed[] = {"/metrics", "/healthz", "/readyz"};
  const bool served =
      match.route != kNoRoute && request.method == "GET" &&
      std::find(std::begin(kServed), std::end(kServed), Routes()[match.route].pattern) != std::end(kServed);
  if (!served) {
    metrics_.Observe(kNoRoute, 404, 0);
    reply(ErrorResponse(404, "not_found",
                        fmt::format("{} is not served here: this address (--metrics-listen) serves GET /metrics, "
                                    "/healthz and /readyz only, without the API token; the API is on --listen",
                                    request.target.substr(0, 200))));
    return {};
  }
  Context context{queue_, options_, metrics_, history_, streams_};
  const Call call{request, target, std::move(match.params)};
  HttpResponse response = Routes()[match.route].handler(context, call);
  metrics_.Observe(match.route, response.status,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  reply(std::move(response));
  return {};
}

}  // namespace delayq::http
