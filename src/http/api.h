// The HTTP API of docs/http-api.md over any delayq::Queue, without a transport: the server feeds
// it parsed requests and writes back what it answers. It knows nothing about which store is
// behind the Queue, nor about sockets (src/server does those). A request passes the guards
// (guard.h), is matched to a route of the table (routes.h) and handed to its handler
// (handlers.h); its bodies are the wire format (src/wire).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/queue.h"
#include "http/history.h"
#include "http/metrics.h"
#include "http/push_stream.h"
#include "http/stream_source.h"

namespace delayq::http {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // path and query: "/v1/queues/orders/jobs?key=k"
  std::string authorization;  // the Authorization header, if any
  std::string body;
  std::string content_type;  // the Content-Type header, if any
  std::string host;          // the Host header, if any
  std::string origin;        // the Origin header, if any (browsers send it)
  // W3C Trace Context: the traceparent header, and the tracestate headers joined with commas, as
  // sent (unchecked: an enqueue uses them only when they are valid, and access logs show the trace).
  std::string traceparent, tracestate;
  // True when the client has hung up (sent its end). Callable until the reply is given. A
  // reserve for a client that is gone takes no job, and jobs a waiting reserve took for a client
  // that left meanwhile go back at once: they would sit leased to nobody for the whole lease.
  std::function<bool()> peer_closed;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Called by the transport when the answer could not be written whole (the client went away, the
  // connection broke): a reserve's answer gives its jobs back (Queue::ReleaseBatch).
  std::function<void()> unwritten;
  // When set, the answer is streamed (Transfer-Encoding: chunked, then Connection: close) from
  // this source instead of `body`.
  std::shared_ptr<StreamSource> stream;
};

using Reply = std::function<void(HttpResponse)>;

struct ApiOptions {
  std::string auth_token;                             // when set, required on everything but /healthz
  int64_t max_waiting = 50'000;                       // waiting reserves at once; more are refused (429)
  std::function<bool()> ready = [] { return true; };  // /readyz
  std::string dashboard_html;                         // served at GET /
  // Host names (besides IP addresses and localhost) that requests may name in Host: a guard
  // against DNS rebinding. "*" allows any.
  std::vector<std::string> allowed_hosts;
  BuildInfo build;                       // GET /v1/version's store and durability
  bool access_log = false;               // log each request that reaches a route (spdlog info); refusals are not
  int64_t stream_heartbeat_ms = 10'000;  // the longest a push stream stays silent (a heartbeat line then)
};

// The HTTP status of a Status code (the one table; the CLI has its exit-code twin).
int HttpStatusOf(Code code);

class Api {
 public:
  Api(Queue& queue, ApiOptions options);

  // Decides from a request's header alone (its body empty) whether it may go on: a response
  // when it is refused (a foreign Host or Origin, not JSON, no or a wrong token). Handle makes
  // the same checks; the server asks this first so that it never reads a refused body.
  std::optional<HttpResponse> Admit(const HttpRequest& head) const;

  // Handles one request. `reply` is called exactly once: before Handle returns, or later from
  // another thread for a reserve that waits. The returned function (when not empty) abandons a
  // waiting reserve: call it when the client has gone away. It is safe to call at any time.
  std::function<void()> Handle(HttpRequest request, Reply reply);

  // The monitoring address (serve --metrics-listen): GET /metrics, /healthz and /readyz without
  // the token or the browser guard (a scraper names the host it scrapes); 404 for everything else.
  std::function<void()> HandleMonitoring(HttpRequest request, Reply reply);

  // Ends every push stream (the server stops; before the store closes): each ends with its last
  // chunk, its deliveries left leased.
  void StopStreams() { streams_.StopAll(); }

  Metrics& metrics() { return metrics_; }
  History& history() { return history_; }

 private:
  Queue& queue_;
  ApiOptions options_;
  Metrics metrics_;
  History history_;
  PushStreams streams_;
};

}  // namespace delayq::http
