// The route table: every route the server answers, once. It drives the dispatch (Api::Handle),
// names the routes in the metrics (RouteName), and is the list the docs and the API contract are
// checked against (tests/http: every route documented). A handler is a function of the
// request's parts; the routes are grouped by family in handlers_*.cc.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/queue.h"
#include "http/api.h"
#include "http/history.h"
#include "http/metrics.h"
#include "http/push_stream.h"
#include "http/target.h"

namespace delayq::http {

// What a handler works with: the API's parts.
struct Context {
  Queue& queue;
  const ApiOptions& options;
  Metrics& metrics;
  History& history;
  PushStreams& streams;
};

// One request matched to a route.
struct Call {
  const HttpRequest& request;
  const Target& target;
  std::vector<std::string> params;  // the pattern's {q}, {id}, in order
  const std::string& queue() const { return params.at(0); }
};

using Handler = HttpResponse (*)(Context& context, const Call& call);
// A handler that may answer later (a reserve that waits): `reply` is called exactly once, maybe
// from a store thread; the returned function (maybe empty) abandons the wait.
using AsyncHandler = std::function<void()> (*)(Context& context, const Call& call, Reply reply);

struct RouteSpec {
  std::string_view method;   // GET, POST, PUT, PATCH, DELETE
  std::string_view pattern;  // "/v1/queues/{q}/jobs/{id}": literal segments and {params}
  std::string_view summary;  // one line: what it does
  Handler handler = nullptr;
  AsyncHandler async = nullptr;
  bool head = false;  // HEAD is answered as GET (the health checks and the dashboard page)
  // The query parameters it takes, comma-separated ("bucket,horizon"); any other is refused,
  // as an unknown field of a body is.
  std::string_view query = "";
};

// The route's query parameters, split ("queue*" in RouteSpec::query: one that may be repeated).
std::vector<std::string_view> QueryParams(const RouteSpec& route);
// Whether the route takes `name` more than once; any other parameter given twice is refused.
bool Repeatable(const RouteSpec& route, std::string_view name);

// Every route, in the order docs/http-api.md documents them.
std::span<const RouteSpec> Routes();

inline constexpr size_t kNoRoute = static_cast<size_t>(-1);
// "POST /v1/queues/{q}/jobs" (the metrics' route label); "other" for kNoRoute.
std::string RouteName(size_t route);

struct RouteMatch {
  size_t route = kNoRoute;
  std::vector<std::string> params;
  // When the path is a route's but the method is none of its: the methods it takes ("GET, PUT").
  std::string allow;
};
RouteMatch MatchRoute(std::string_view method, const std::vector<std::string>& segments);

}  // namespace delayq::http
