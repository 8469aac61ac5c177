#include "http/api.h"

#include <fmt/format.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <optional>
#include <set>

#include "core/duration.h"
#include "core/receipt.h"
#include "http/json.h"

namespace delayq::http {

int HttpStatusOf(Code code) {
  switch (code) {
    case Code::kOk: return 200;
    case Code::kInvalidArgument: return 400;
    case Code::kUnauthenticated: return 401;
    case Code::kNotFound: return 404;
    case Code::kConflict: return 409;
    case Code::kLeaseExpired: return 409;
    case Code::kTooLarge: return 413;
    case Code::kResourceExhausted: return 429;
    case Code::kUnavailable: return 503;
    case Code::kIoError: return 503;
    case Code::kCorruption: return 500;
    case Code::kInternal: return 500;
  }
  return 500;
}

namespace {

// "Authorization: Bearer TOKEN", the scheme in any case (RFC 7235), compared in time that does
// not depend on where the token differs (a timing side channel would reveal it byte by byte).
bool BearerMatches(std::string_view header, std::string_view token) {
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return false;
  }
  std::string_view given = header.substr(kScheme.size());
  while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) {
    diff |= static_cast<unsigned char>(token[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorResponse(const Status& s) {
  return JsonResponse(HttpStatusOf(s.code()), ErrorBody(s.code(), s.message()));
}

HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message) {
  JsonWriter w;
  w.BeginObject().Key("error").BeginObject();
  w.Key("code").String(code).Key("message").String(message);
  w.EndObject().EndObject();
  return JsonResponse(status, w.Take());
}

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The host name of a Host header or an origin's authority: "[::1]:7070" -> "::1",
// "Example.com:80" -> "example.com".
std::string HostName(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    return Lower(authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  return Lower(authority.substr(0, authority.rfind(':')));
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 || ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace


int FromHex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding ('+' is a space only in queries).
std::string Decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && FromHex(s[i + 1]) >= 0 && FromHex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(FromHex(s[i + 1]) * 16 + FromHex(s[i + 2])));
      i += 2;
    } else if (plus_is_space && s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The successes of a batch, each delivery once (a receipt repeated in the batch counts once).
int64_t CountOk(const std::vector<Status>& statuses, const std::vector<size_t>& first) {
  int64_t n = 0;
  for (size_t i = 0; i < statuses.size(); ++i) n += first[i] == i && statuses[i].ok();
  return n;
}

// The failures of a batch, one entry per receipt as spelled (a client finds each of its
// receipts there), without repeating an identical one.
void WriteFailures(JsonWriter& w, const std::vector<std::string>& receipts,
                   const std::vector<Status>& statuses) {
  std::set<std::string_view> listed;
  w.Key("failed").BeginArray();
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].ok() || !listed.insert(receipts[i]).second) continue;
    w.BeginObject();
    w.Key("receipt").String(receipts[i]);
    w.Key("code").String(CodeName(statuses[i].code()));
    w.Key("message").String(statuses[i].message());
    w.EndObject();
  }
  w.EndArray();
}

// A duration query parameter: "1m", "3600000" (ms).
Result<int64_t> QueryDuration(std::string_view name, const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() < 16) {
    return std::stoll(text);
  }
  auto d = ParseDuration(text);
  if (!d.ok()) return Status::InvalidArgument(fmt::format("{}: {}", name, d.status().message()));
  return *d;
}

}  // namespace

struct Api::Target {
  std::vector<std::string> segments;  // decoded path segments
  std::vector<std::pair<std::string, std::string>> query;
  const std::string* Query(std::string_view name) const {
    for (const auto& [k, v] : query) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  static Target Parse(std::string_view target) {
    Target t;
    std::string_view path = target, query;
    if (auto q = target.find('?'); q != std::string_view::npos) {
      path = target.substr(0, q);
      query = target.substr(q + 1);
    }
    size_t start = 0;
    while (start <= path.size()) {
      size_t slash = path.find('/', start);
      if (slash == std::string_view::npos) slash = path.size();
      if (slash > start) t.segments.push_back(Decode(path.substr(start, slash - start), false));
      start = slash + 1;
    }
    while (!query.empty()) {
      size_t amp = query.find('&');
      std::string_view part = query.substr(0, amp);
      size_t eq = part.find('=');
      if (!part.empty()) {
        t.query.emplace_back(Decode(part.substr(0, eq), true),
                             eq == std::string_view::npos ? "" : Decode(part.substr(eq + 1), true));
      }
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    }
    return t;
  }
};

// A web page in a browser on a machine that can reach delayq must not drive it (SPEC 10.1):
//  - DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends
//    "Host: evil.example"; only IP addresses, localhost and --allowed-hosts are answered;
//  - cross-site requests: a browser sends Origin; it must be this server itself;
//  - a cross-site form or fetch without a preflight can only send text/plain, form or
//    multipart bodies: requests with a body (POST, PUT, PATCH) must say application/json.
// Clients that are not browsers send no Origin and pass the first two rules unchanged.
std::optional<HttpResponse> RefuseBrowserAttack(const HttpRequest& request,
                                                const std::vector<std::string>& allowed_hosts) {
  const bool any_host = std::find(allowed_hosts.begin(), allowed_hosts.end(), "*") != allowed_hosts.end();
  if (!request.host.empty() && !any_host) {
    const std::string name = HostName(request.host);
    if (name != "localhost" && !IsIpLiteral(name) &&
        std::find(allowed_hosts.begin(), allowed_hosts.end(), name) == allowed_hosts.end()) {
      return ErrorResponse(403, "forbidden",
                           fmt::format("Host \"{}\" is not a name this server answers to; name it with "
                                       "delayq serve --allowed-hosts {} (a guard against DNS rebinding)",
                                       request.host.substr(0, 200), name.substr(0, 200)));
    }
  }
  if (!request.origin.empty()) {
    const size_t scheme = request.origin.find("://");
    const std::string authority =
        scheme == std::string::npos ? "" : Lower(std::string_view(request.origin).substr(scheme + 3));
    if (authority.empty() || authority != Lower(request.host)) {
      return ErrorResponse(403, "forbidden",
                           fmt::format("a request from the web page at {} is refused: only delayq's own "
                                       "dashboard may call the API from a browser",
                                       request.origin.substr(0, 200)));
    }
  }
  if (request.method == "POST" || request.method == "PUT" || request.method == "PATCH") {
    const std::string type = Lower(request.content_type.substr(0, request.content_type.find(';')));
    std::string trimmed = type;
    while (!trimmed.empty() && trimmed.back() == ' ') trimmed.pop_back();
    if (trimmed != "application/json") {
      return ErrorResponse(415, "unsupported_media_type",
                           fmt::format("{} needs \"Content-Type: application/json\" (got {}); with curl, "
                                       "use --json '{{...}}' or -H 'Content-Type: application/json'",
                                       request.method,
                                       request.content_type.empty() ? "none" : "\"" + request.content_type.substr(0, 100) + "\""));
    }
  }
  return std::nullopt;
}

std::optional<HttpResponse> Api::Unauthenticated(const HttpRequest& request, const Target& target) const {
  // Public: /healthz, and the dashboard's page itself (it holds no data; it asks for the token
  // before it calls the API).
  const bool public_route = (target.segments.size() == 1 && target.segments[0] == "healthz") ||
                            (target.segments.empty() && (request.method == "GET" || request.method == "HEAD"));
  if (options_.auth_token.empty() || public_route || BearerMatches(request.authorization, options_.auth_token)) {
    return std::nullopt;
  }
  HttpResponse r = ErrorResponse(401, "unauthenticated",
                                 request.authorization.empty()
                                     ? "this server needs a bearer token: send \"Authorization: "
                                       "Bearer <token>\" (the token given to delayq serve)"
                                     : "the bearer token is wrong");
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

std::optional<HttpResponse> Api::Admit(const HttpRequest& head) const {
  if (auto refused = RefuseBrowserAttack(head, options_.allowed_hosts)) return refused;
  return Unauthenticated(head, Target::Parse(head.target));
}

Api::Api(Queue& queue, ApiOptions options) : queue_(queue), options_(std::move(options)) {
  for (std::string& host : options_.allowed_hosts) host = Lower(host);  // host names ignore case
}

std::function<void()> Api::Handle(HttpRequest request, Reply reply) {
  const auto started = std::chrono::steady_clock::now();
  const Target target = Target::Parse(request.target);
  Route route = Route::kOther;
  // Wraps `reply` to record the request's latency once it is answered.
  auto observed = std::make_shared<Reply>(std::move(reply));
  auto finish = [this, started, observed](Route r, HttpResponse response) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    metrics_.Observe(r, response.status, seconds);
    (*observed)(std::move(response));
  };

  if (auto refused = RefuseBrowserAttack(request, options_.allowed_hosts)) {
    finish(Route::kOther, std::move(*refused));
    return {};
  }

  if (auto refused = Unauthenticated(request, target)) {
    finish(Route::kOther, std::move(*refused));
    return {};
  }

  const auto& s = target.segments;
  if (s.size() == 4 && s[0] == "v1" && s[1] == "queues" && s[3] == "reserve" &&
      request.method == "POST") {
    // The one route that may wait: answered from the store's callback, holding no thread.
    auto parsed = ParseReserve(request.body);
    if (!parsed.ok()) {
      finish(Route::kReserve, ErrorResponse(parsed.status()));
      return {};
    }
    if (request.peer_closed && request.peer_closed()) {
      finish(Route::kReserve, JsonResponse(200, R"({"jobs":[]})"));
      return {};
    }
    const bool waits = parsed->wait_ms > 0;
    if (waits && metrics_.waiting.load() >= options_.max_waiting) {
      finish(Route::kReserve,
             ErrorResponse(Status::ResourceExhausted(fmt::format(
                 "{} reserves are already waiting, the most this server holds (--max-waiting); "
                 "retry shortly or use a shorter wait_ms",
                 options_.max_waiting))));
      return {};
    }
    if (waits) ++metrics_.waiting;
    const uint64_t handle = queue_.ReserveAsync(
        s[2], *parsed,
        [this, finish, waits, queue = std::string(s[2]), peer_closed = request.peer_closed](
            Result<std::vector<Delivery>> jobs) {
          if (waits) --metrics_.waiting;
          if (!jobs.ok()) {
            finish(Route::kReserve, ErrorResponse(jobs.status()));
            return;
          }
          if (!jobs->empty() && peer_closed && peer_closed()) {
            // The consumer left while the jobs were taken for it: they are ready again now
            // rather than at the end of a lease nobody holds (the delivery counts as an attempt).
            for (const auto& d : *jobs) {
              (void)queue_.Nack(queue, NackRequest{.receipt = d.receipt,
                                                   .retry_in_ms = 0,
                                                   .error = "the consumer hung up before the delivery reached it"});
            }
            jobs->clear();
          }
          JsonWriter w;
          w.BeginObject().Key("jobs").BeginArray();
          for (const auto& d : *jobs) WriteDelivery(w, d);
          w.EndArray().EndObject();
          finish(Route::kReserve, JsonResponse(200, w.Take()));
        });
    if (handle == 0) return {};
    return [this, handle] { queue_.CancelReserve(handle); };
  }

  HttpResponse response = Dispatch(request, target, &route);
  finish(route, std::move(response));
  return {};
}

HttpResponse Api::Dispatch(const HttpRequest& req, const Target& t, Route* route) {
  const auto& s = t.segments;
  const std::string& m = req.method;
  auto not_allowed = [&](const char* allow) {
    HttpResponse r = ErrorResponse(405, "method_not_allowed",
                                   fmt::format("{} is not allowed on {}; allowed: {}", m,
                                               req.target.substr(0, 200), allow));
    r.headers.emplace_back("Allow", allow);
    return r;
  };

  if (s.empty()) {
    *route = Route::kDashboard;
    if (m != "GET" && m != "HEAD") return not_allowed("GET");
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-cache");
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                           "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'");
    r.body = options_.dashboard_html.empty()
                 ? "<!doctype html><title>delayq</title><h1>delayq</h1><p>The HTTP API is at "
                   "<a href=\"/v1/queues\">/v1/queues</a>; metrics at <a "
                   "href=\"/metrics\">/metrics</a>.</p>"
                 : options_.dashboard_html;
    return r;
  }
  if (s.size() == 1 && s[0] == "healthz") {
    *route = Route::kHealth;
    if (m != "GET" && m != "HEAD") return not_allowed("GET");
    return JsonResponse(200, R"({"status":"ok"})");
  }
  if (s.size() == 1 && s[0] == "readyz") {
    *route = Route::kReady;
    if (m != "GET" && m != "HEAD") return not_allowed("GET");
    if (!options_.ready()) {
      return ErrorResponse(Status::Unavailable("the store is not open yet or is shutting down"));
    }
    Status health = queue_.Health();
    if (!health.ok()) return ErrorResponse(health);
    return JsonResponse(200, R"({"status":"ready"})");
  }
  if (s.size() == 1 && s[0] == "metrics") {
    *route = Route::kMetrics;
    if (m != "GET") return not_allowed("GET");
    auto stats = queue_.ListQueues();
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.Render(stats.ok() ? *stats : std::vector<QueueStats>{},
                             stats.ok() && queue_.Health().ok());
    return r;
  }
  if (s.size() == 2 && s[0] == "v1" && s[1] == "history") {
    *route = Route::kHistory;
    if (m != "GET") return not_allowed("GET");
    std::vector<std::string> names;
    for (const auto& [k, v] : t.query) {
      if (k == "queue") names.push_back(v);
    }
    return JsonResponse(200, history_.Json(names));
  }
  if (s.size() < 2 || s[0] != "v1" || s[1] != "queues") {
    return ErrorResponse(404, "not_found",
                         fmt::format("no such route: {}; the API is under /v1/queues",
                                     req.target.substr(0, 200)));
  }
  if (s.size() == 2) {
    *route = Route::kListQueues;
    if (m != "GET") return not_allowed("GET");
    auto list = queue_.ListQueues();
    if (!list.ok()) return ErrorResponse(list.status());
    JsonWriter w;
    w.BeginObject().Key("queues").BeginArray();
    for (const auto& q : *list) WriteStats(w, q);
    w.EndArray().EndObject();
    return JsonResponse(200, w.Take());
  }
  const std::string& q = s[2];
  if (s.size() == 3 && m == "DELETE") {
    *route = Route::kDeleteQueue;
    bool force = false;
    for (const auto& [k, v] : t.query) {
      if (k != "force") continue;
      if (v != "true" && v != "false") {
        return ErrorResponse(400, "invalid_argument",
                             fmt::format("force is \"{}\"; use true or false", v.substr(0, 40)));
      }
      force = v == "true";
    }
    auto deleted = queue_.DeleteQueue(q, force);
    if (!deleted.ok()) return ErrorResponse(deleted.status());
    return JsonResponse(200, fmt::format(R"({{"deleted":true,"jobs":{}}})", *deleted));
  }
  if (s.size() == 3) {
    *route = Route::kStats;
    if (m != "GET") return not_allowed("GET, DELETE");
    auto stats = queue_.Stats(q);
    if (!stats.ok()) return ErrorResponse(stats.status());
    JsonWriter w;
    WriteStats(w, *stats);
    return JsonResponse(200, w.Take());
  }
  const std::string& op = s[3];
  if (s.size() == 4 && op == "config") {
    if (m == "GET") {
      *route = Route::kConfigGet;
      auto c = queue_.GetConfig(q);
      if (!c.ok()) return ErrorResponse(c.status());
      JsonWriter w;
      WriteConfig(w, *c);
      return JsonResponse(200, w.Take());
    }
    *route = Route::kConfigPut;
    if (m != "PUT") return not_allowed("GET, PUT");
    auto current = queue_.GetConfig(q);
    if (!current.ok()) return ErrorResponse(current.status());
    auto c = ParseConfig(req.body, *current);
    if (!c.ok()) return ErrorResponse(c.status());
    Status st = queue_.SetConfig(q, *c);
    if (!st.ok()) return ErrorResponse(st);
    JsonWriter w;
    WriteConfig(w, *c);
    return JsonResponse(200, w.Take());
  }
  if (s.size() == 4 && (op == "pause" || op == "resume")) {
    *route = op == "pause" ? Route::kPause : Route::kResume;
    if (m != "POST") return not_allowed("POST");
    Status st = op == "pause" ? queue_.Pause(q) : queue_.Resume(q);
    if (!st.ok()) return ErrorResponse(st);
    return JsonResponse(200, op == "pause" ? R"({"paused":true})" : R"({"paused":false})");
  }
  if (s.size() == 4 && op == "reserve") {  // POST is handled in Handle
    *route = Route::kReserve;
    return not_allowed("POST");
  }
  if (s.size() == 4 && (op == "ack" || op == "nack" || op == "touch")) {
    *route = op == "ack" ? Route::kAck : op == "nack" ? Route::kNack : Route::kTouch;
    if (m != "POST") return not_allowed("POST");
    auto body = ParseReceipts(req.body);
    if (!body.ok()) return ErrorResponse(body.status());
    const auto& receipts = body->receipts;
    const std::vector<size_t> first = FirstOccurrences(receipts);
    JsonWriter w;
    if (op == "ack") {
      std::vector<Status> results = queue_.AckBatch(q, receipts);
      if (!body->batch) {
        if (!results[0].ok()) return ErrorResponse(results[0]);
        return JsonResponse(200, R"({"acked":1})");
      }
      w.BeginObject().Key("acked").Int(CountOk(results, first));
      WriteFailures(w, receipts, results);
      w.EndObject();
      return JsonResponse(200, w.Take());
    }
    if (op == "nack") {
      std::vector<Status> results;
      NackResult last;
      for (size_t i = 0; i < receipts.size(); ++i) {
        if (first[i] != i) {  // the same delivery again: nacked once
          results.push_back(results[first[i]]);
          continue;
        }
        auto res = queue_.Nack(q, {receipts[i], body->retry_in_ms, body->error, body->dead});
        results.push_back(res.ok() ? Status::Ok() : res.status());
        if (res.ok()) last = *res;
      }
      if (!body->batch) {
        if (!results[0].ok()) return ErrorResponse(results[0]);
        w.BeginObject().Key("state").String(JobStateName(last.state));
        w.Key("due_at").Int(last.due_at_ms);  // when dead: the due time the job had
        w.EndObject();
        return JsonResponse(200, w.Take());
      }
      w.BeginObject().Key("nacked").Int(CountOk(results, first));
      WriteFailures(w, receipts, results);
      w.EndObject();
      return JsonResponse(200, w.Take());
    }
    std::vector<Status> results;
    int64_t deadline = 0;
    for (size_t i = 0; i < receipts.size(); ++i) {
      if (first[i] != i) {
        results.push_back(results[first[i]]);
        continue;
      }
      auto res = queue_.Touch(q, receipts[i], body->lease_ms);
      results.push_back(res.ok() ? Status::Ok() : res.status());
      if (res.ok()) deadline = res->lease_deadline_ms;
    }
    if (!body->batch) {
      if (!results[0].ok()) return ErrorResponse(results[0]);
      w.BeginObject().Key("lease_deadline").Int(deadline).EndObject();
      return JsonResponse(200, w.Take());
    }
    w.BeginObject().Key("touched").Int(CountOk(results, first));
    WriteFailures(w, receipts, results);
    w.EndObject();
    return JsonResponse(200, w.Take());
  }
  if (op == "jobs" && (s.size() == 4 || s.size() == 5)) {
    if (s.size() == 4 && m == "POST") {
      *route = Route::kEnqueue;
      auto body = ParseEnqueue(req.body);
      if (!body.ok()) return ErrorResponse(body.status());
      JsonWriter w;
      if (!body->batch) {
        auto r = queue_.Enqueue(q, body->jobs[0]);
        if (!r.ok()) return ErrorResponse(r.status());
        w.BeginObject().Key("id").String(r->id).Key("due_at").Int(r->due_at_ms);
        w.Key("duplicate").Bool(r->duplicate);
        if (r->replaced) w.Key("replaced").Bool(true);
        w.EndObject();
        return JsonResponse(r->duplicate ? 200 : 201, w.Take());
      }
      auto r = queue_.EnqueueBatch(q, body->jobs);
      if (!r.ok()) return ErrorResponse(r.status());
      w.BeginObject().Key("jobs").BeginArray();
      for (const auto& e : *r) {
        w.BeginObject().Key("id").String(e.id).Key("due_at").Int(e.due_at_ms);
        w.Key("duplicate").Bool(e.duplicate);
        if (e.replaced) w.Key("replaced").Bool(true);
        w.EndObject();
      }
      w.EndArray().EndObject();
      return JsonResponse(201, w.Take());
    }
    // A job by id (/jobs/{id}) or by key (/jobs?key=K).
    JobRef ref;
    if (s.size() == 5) {
      ref = JobRef::ById(s[4]);
    } else if (const std::string* key = t.Query("key")) {
      ref = JobRef::ByKey(*key);
    } else {
      *route = Route::kGetJob;
      if (m != "GET" && m != "PATCH" && m != "DELETE") {
        return not_allowed("POST, GET, PATCH, DELETE");
      }
      return ErrorResponse(Status::InvalidArgument(
          "give a job id (/v1/queues/{q}/jobs/{id}) or a key (/v1/queues/{q}/jobs?key=K)"));
    }
    if (m == "GET") {
      *route = Route::kGetJob;
      auto job = queue_.Get(q, ref);
      if (!job.ok()) return ErrorResponse(job.status());
      JsonWriter w;
      WriteJob(w, *job);
      return JsonResponse(200, w.Take());
    }
    if (m == "DELETE") {
      *route = Route::kCancel;
      Status st = queue_.Cancel(q, ref);
      if (!st.ok()) return ErrorResponse(st);
      return JsonResponse(200, R"({"cancelled":true})");
    }
    if (m == "PATCH") {
      *route = Route::kReschedule;
      auto when = ParseWhen(req.body);
      if (!when.ok()) return ErrorResponse(when.status());
      auto job = queue_.Reschedule(q, ref, *when);
      if (!job.ok()) return ErrorResponse(job.status());
      JsonWriter w;
      WriteJob(w, *job);
      return JsonResponse(200, w.Take());
    }
    return not_allowed(s.size() == 4 ? "POST, GET, PATCH, DELETE" : "GET, PATCH, DELETE");
  }
  if (op == "dead" && s.size() == 4) {
    if (m == "GET") {
      *route = Route::kDeadList;
      int64_t limit = 100;
      if (const std::string* l = t.Query("limit")) {
        if (l->empty() || l->size() > 6 || l->find_first_not_of("0123456789") != std::string::npos) {
          return ErrorResponse(Status::InvalidArgument(
              fmt::format("limit \"{}\" must be a number from 1 to 1000", l->substr(0, 20))));
        }
        limit = std::stoll(*l);
      }
      auto jobs = queue_.ListDead(q, static_cast<int32_t>(limit));
      if (!jobs.ok()) return ErrorResponse(jobs.status());
      JsonWriter w;
      w.BeginObject().Key("jobs").BeginArray();
      for (const auto& j : *jobs) WriteJob(w, j);
      w.EndArray().EndObject();
      return JsonResponse(200, w.Take());
    }
    *route = Route::kDeadPurge;
    if (m != "DELETE") return not_allowed("GET, DELETE");
    auto n = queue_.PurgeDead(q);
    if (!n.ok()) return ErrorResponse(n.status());
    return JsonResponse(200, fmt::format(R"({{"purged":{}}})", *n));
  }
  if (op == "dead" && s.size() == 5 && s[4] == "replay") {
    *route = Route::kDeadReplay;
    if (m != "POST") return not_allowed("POST");
    auto ids = ParseReplay(req.body);
    if (!ids.ok()) return ErrorResponse(ids.status());
    auto n = queue_.ReplayDead(q, *ids);
    if (!n.ok()) return ErrorResponse(n.status());
    return JsonResponse(200, fmt::format(R"({{"replayed":{}}})", *n));
  }
  if (op == "schedule" && s.size() == 4) {
    *route = Route::kSchedule;
    if (m != "GET") return not_allowed("GET");
    const std::string* b = t.Query("bucket");
    const std::string* h = t.Query("horizon");
    auto bucket = QueryDuration("bucket", b ? *b : "1m");
    if (!bucket.ok()) return ErrorResponse(bucket.status());
    auto horizon = QueryDuration("horizon", h ? *h : "1h");
    if (!horizon.ok()) return ErrorResponse(horizon.status());
    if (*bucket <= 0) return ErrorResponse(Status::InvalidArgument("bucket must be positive"));
    int64_t n = (*horizon + *bucket - 1) / *bucket;
    if (n < 1 || n > 10'000) {
      return ErrorResponse(Status::InvalidArgument(fmt::format(
          "horizon / bucket gives {} buckets; it must give 1 to 10000", n)));
    }
    auto hist = queue_.Schedule(q, *bucket, static_cast<int32_t>(n));
    if (!hist.ok()) return ErrorResponse(hist.status());
    JsonWriter w;
    w.BeginObject().Key("start").Int(hist->start_ms).Key("bucket_ms").Int(hist->bucket_ms);
    w.Key("buckets").BeginArray();
    for (int64_t c : hist->buckets) w.Int(c);
    w.EndArray().Key("later").Int(hist->later).EndObject();
    return JsonResponse(200, w.Take());
  }
  return ErrorResponse(404, "not_found",
                       fmt::format("no such route: {}", req.target.substr(0, 200)));
}

}  // namespace delayq::http
