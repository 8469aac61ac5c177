// The HTTP API (docs/http-api.md) in-process: every route and every error, against the engine with
// a manual clock. The same routes are exercised through the real binary in tests/integration.
#include "http/api.h"
#include "http/process.h"

#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "core/version.h"
#include "http/routes.h"
#include "store/embedded/engine_harness.h"
#include "support/process.h"

namespace delayq::testing {
namespace {

using nlohmann::json;

class ApiTest : public ::testing::Test {
 protected:
  ApiTest() : api_(h_.queue(), {}) {}

  http::HttpResponse Call(const std::string& method, const std::string& target, const std::string& body = "",
                          const std::string& auth = "") {
    std::promise<http::HttpResponse> p;
    auto f = p.get_future();
    const bool has_body = method == "POST" || method == "PUT" || method == "PATCH";
    api_.Handle({method, target, auth, body, has_body ? "application/json" : ""},
                [&p](http::HttpResponse r) { p.set_value(std::move(r)); });
    return f.get();
  }
  json J(const http::HttpResponse& r) { return json::parse(r.body); }
  void ExpectError(const http::HttpResponse& r, int status, const std::string& code, const std::string& mention = "") {
    EXPECT_EQ(r.status, status) << r.body;
    json body = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(body.contains("error")) << r.body;
    EXPECT_EQ(body["error"]["code"], code) << r.body;
    EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());
    if (!mention.empty()) {
      EXPECT_NE(body["error"]["message"].get<std::string>().find(mention), std::string::npos) << r.body;
    }
  }

  EngineHarness h_;
  http::Api api_;
};

TEST_F(ApiTest, EnqueueGetReserveAckRoundTripWithVerbatimPayload) {
  const std::string payload = R"({"orderId": "42",  "amount":1.50,"tags":["a" , "b"]})";
  auto e =
      Call("POST", "/v1/queues/orders/jobs", R"({"payload": )" + payload + R"(, "delay_ms": 1800000, "key": "order-42",
                    "headers": {"version": "2"}, "max_attempts": 3})");
  ASSERT_EQ(e.status, 201) << e.body;
  json er = J(e);
  EXPECT_EQ(er["duplicate"], false);
  EXPECT_EQ(er["due_at"], h_.NowMs() + 1'800'000);
  const std::string id = er["id"];

  auto dup = Call("POST", "/v1/queues/orders/jobs", R"({"payload": 1, "delay": "30m", "key": "order-42"})");
  EXPECT_EQ(dup.status, 200);
  EXPECT_EQ(J(dup)["duplicate"], true);
  EXPECT_EQ(J(dup)["id"], id);

  auto g = Call("GET", "/v1/queues/orders/jobs/" + id);
  ASSERT_EQ(g.status, 200);
  EXPECT_NE(g.body.find(payload), std::string::npos) << "payload not verbatim: " << g.body;
  json job = J(g);
  EXPECT_EQ(job["state"], "scheduled");
  EXPECT_EQ(job["queue"], "orders");
  EXPECT_EQ(job["key"], "order-42");
  EXPECT_EQ(job["headers"]["version"], "2");
  EXPECT_EQ(job["max_attempts"], 3);
  EXPECT_EQ(job["attempt"], 0);
  EXPECT_TRUE(job["last_error"].is_null());
  EXPECT_TRUE(job.contains("created_at"));
  EXPECT_EQ(J(Call("GET", "/v1/queues/orders/jobs?key=order-42"))["id"], id);

  h_.Advance(1'800'000);
  auto r = Call("POST", "/v1/queues/orders/reserve", R"({"max": 10, "lease_ms": 60000})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(payload), std::string::npos);
  json jobs = J(r)["jobs"];
  ASSERT_EQ(jobs.size(), 1u);
  for (const char* field : {"id", "receipt", "payload", "headers", "attempt", "due_at", "key"}) {
    EXPECT_TRUE(jobs[0].contains(field)) << field;
  }
  const std::string receipt = jobs[0]["receipt"];
  EXPECT_EQ(J(Call("GET", "/v1/queues/orders/jobs/" + id))["state"], "reserved");
  auto t = Call("POST", "/v1/queues/orders/touch", R"({"receipt":")" + receipt + R"(","lease_ms":90000})");
  EXPECT_EQ(t.status, 200);
  EXPECT_EQ(J(t)["lease_deadline"], h_.NowMs() + 90'000);
  auto a = Call("POST", "/v1/queues/orders/ack", R"({"receipt":")" + receipt + R"("})");
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(J(a)["acked"], 1);
  ExpectError(Call("POST", "/v1/queues/orders/ack", R"({"receipt":")" + receipt + R"("})"), 404, "not_found");
  ExpectError(Call("GET", "/v1/queues/orders/jobs/" + id), 404, "not_found");
}

TEST_F(ApiTest, BinaryPayloadsTravelAsBase64) {
  auto e = Call("POST", "/v1/queues/b/jobs", R"({"payload_base64": "AP8Q"})");
  ASSERT_EQ(e.status, 201) << e.body;
  json job = J(Call("GET", "/v1/queues/b/jobs/" + J(e)["id"].get<std::string>()));
  EXPECT_EQ(job["payload_base64"], "AP8Q");
  EXPECT_FALSE(job.contains("payload"));
  ExpectError(Call("POST", "/v1/queues/b/jobs", R"({"payload_base64": "***"})"), 400, "invalid_argument",
              "payload_base64");
  ExpectError(Call("POST", "/v1/queues/b/jobs", R"({"payload": 1, "payload_base64": "AA=="})"), 400, "invalid_argument",
              "payload");
}

TEST_F(ApiTest, DelayFormsAndBatches) {
  const int64_t now = h_.NowMs();
  EXPECT_EQ(J(Call("POST", "/v1/queues/d/jobs", R"({"payload":1,"delay":"1h30m"})"))["due_at"], now + 5'400'000);
  EXPECT_EQ(J(Call("POST", "/v1/queues/d/jobs", R"({"payload":1,"deliver_at":"2026-01-01T01:00:00Z"})"))["due_at"],
            1'767'229'200'000);
  EXPECT_EQ(
      J(Call("POST", "/v1/queues/d/jobs", R"({"payload":1,"deliver_at":)" + std::to_string(now + 5) + "}"))["due_at"],
      now + 5);
  EXPECT_EQ(J(Call("POST", "/v1/queues/d/jobs", R"({"payload":1,"deliver_at":1000})"))["due_at"], now)
      << "the past means now";
  EXPECT_EQ(J(Call("POST", "/v1/queues/d/jobs", R"({"payload":1})"))["due_at"], now);
  auto b = Call("POST", "/v1/queues/d/jobs", R"({"jobs":[{"payload":1},{"payload":2,"delay_ms":5}]})");
  ASSERT_EQ(b.status, 201) << b.body;
  ASSERT_EQ(J(b)["jobs"].size(), 2u);
  EXPECT_EQ(J(b)["jobs"][1]["due_at"], now + 5);
  ExpectError(Call("POST", "/v1/queues/d/jobs", R"({"jobs":[{"payload":1},{"delay_ms":5}]})"), 400, "invalid_argument",
              "jobs[1].payload");
  ExpectError(Call("POST", "/v1/queues/d/jobs", R"({"jobs":[]})"), 400, "invalid_argument");
  std::string big = R"({"jobs":[)";
  for (int i = 0; i < 1001; ++i) big += std::string(i ? "," : "") + R"({"payload":1})";
  ExpectError(Call("POST", "/v1/queues/d/jobs", big + "]}"), 413, "too_large");
}

TEST_F(ApiTest, EveryInputErrorNamesTheField) {
  struct Case {
    std::string body, mention;
    int status = 400;
  } cases[] = {
      {"", "empty"},
      {"{", "not valid JSON"},
      {R"({"payload":1,)", "not valid JSON"},
      {"[1,2]", "JSON object"},
      {R"({"payload":1,"delay_ms":"5"})", "delay_ms"},
      {R"({"payload":1,"delay_ms":-1})", "delay_ms"},
      {R"({"payload":1,"delay_ms":1.5})", "delay_ms"},
      {R"({"payload":1,"delay_ms":99999999999999999999})", "number"},
      {R"({"payload":1,"delay":"5 minutes"})", "delay"},
      {R"({"payload":1,"delay":5})", "delay"},
      {R"({"payload":1,"deliver_at":"tomorrow"})", "deliver_at"},
      {R"({"payload":1,"deliver_at":true})", "deliver_at"},
      {R"({"payload":1,"delay_ms":5,"delay":"5s"})", "both given"},
      {R"({"payload":1,"delay_ms":40000000000})", "max_delay"},
      {R"({"payload":1,"key":7})", "key"},
      {R"({"payload":1,"replace":"yes"})", "replace"},
      {R"({"payload":1,"headers":[]})", "headers"},
      {R"({"payload":1,"headers":{"v":2}})", "headers.v"},
      {R"({"payload":1,"max_attempts":0})", "max_attempts"},
      {R"({"payload":1,"max_attempts":"3"})", "max_attempts"},
      {R"({"delay_ms":5})", "payload"},
      {"{\"payload\":\"\xff\xfe\"}", "UTF-8"},
      {std::string(200, '[') + std::string(200, ']'), "deeper"},
      {R"({"payload":)" + std::string(100, '[') + std::string(100, ']') + "}", "deeper"},
      {R"({"payload":")" + std::string((1 << 20) + 10, 'x') + R"("})", "max_payload", 413},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    auto r = Call("POST", "/v1/queues/errs/jobs", c.body);
    ExpectError(r, c.status, c.status == 413 ? "too_large" : "invalid_argument", c.mention);
  }
  ExpectError(Call("POST", "/v1/queues/bad%20name/jobs", R"({"payload":1})"), 400, "invalid_argument", "queue name");
  ExpectError(Call("POST", "/v1/queues/" + std::string(129, 'q') + "/jobs", R"({"payload":1})"), 400,
              "invalid_argument", "queue name");
  // Nothing was stored by any of them.
  ExpectError(Call("GET", "/v1/queues/errs"), 404, "not_found");
}

// Request objects and query strings are closed (docs/security.md): a typo is a 400 that names the field
// and the nearest known one, and changes nothing, on every route that takes a body or a query.
TEST_F(ApiTest, AnUnknownFieldOrQueryParameterIsRefusedAndChangesNothing) {
  auto e = Call("POST", "/v1/queues/t/jobs", R"({"payload":1,"key":"k"})");
  ASSERT_EQ(e.status, 201);
  const std::string id = J(e)["id"];
  ASSERT_EQ(J(Call("POST", "/v1/queues/t/reserve", R"({"max":1})"))["jobs"].size(), 1u);
  auto before = h_.queue().Stats("t");
  ASSERT_TRUE(before.ok());
  struct Case {
    std::string method, target, body, mention;
  } cases[] = {
      {"POST", "/v1/queues/t/jobs", R"({"payload":1,"dealy_ms":5000})",
       R"(unknown field "dealy_ms" (did you mean "delay_ms"?))"},
      {"POST", "/v1/queues/t/jobs", R"({"jobs":[{"payload":1},{"payload":2,"kye":"x"}]})",
       R"(unknown field "jobs[1].kye" (did you mean "key"?))"},
      {"POST", "/v1/queues/t/jobs", R"({"jobs":[{"payload":1}],"max_attempts":2})", "each job's fields go inside"},
      {"POST", "/v1/queues/t/reserve", R"({"max":1,"wait":10})", R"(did you mean "wait_ms"?)"},
      {"POST", "/v1/queues/t/ack", R"({"reciept":"x"})", R"(did you mean "receipt"?)"},
      {"POST", "/v1/queues/t/nack", R"({"receipt":"x","retry_in":5})", R"(did you mean "retry_in_ms"?)"},
      {"POST", "/v1/queues/t/touch", R"({"receipt":"x","lease":5})", R"(did you mean "lease_ms"?)"},
      {"PUT", "/v1/queues/t/config", R"({"lease_ms":5000,"max_atempts":1})", R"(did you mean "max_attempts"?)"},
      {"PUT", "/v1/queues/t/config", R"({"rate_per_second":5})", R"(did you mean "rate_per_s"?)"},
      {"PUT", "/v1/queues/t/config", R"({"rate_per_s":"fast"})", "rate_per_s"},
      {"PUT", "/v1/queues/t/config", R"({"burst":2.5})", "burst"},
      {"PUT", "/v1/queues/t/config", R"({"max_reserved":-1})", "max_reserved"},
      {"PUT", "/v1/queues/t/config", R"({"rate_per_s":1e300})", "rate_per_s"},
      {"POST", "/v1/queues/t/jobs", R"({"payload":1,"debounce":"yes","key":"k"})", "debounce"},
      {"POST", "/v1/queues/t/jobs", R"({"payload":1,"debounce":true})", "debounce is set without a key"},
      {"PATCH", "/v1/queues/t/jobs/" + id, R"({"dealy":"5s"})", R"(did you mean "delay"?)"},
      {"POST", "/v1/queues/t/dead/replay", R"({"id":[]})", R"(did you mean "ids"?)"},
      {"GET", "/v1/queues/t/dead?limt=5", "", R"(unknown query parameter "limt" (did you mean "limit"?))"},
      {"GET", "/v1/queues/t/jobs?kye=k", "", R"(did you mean "key"?)"},
      {"DELETE", "/v1/queues/t?forse=true", "", R"(did you mean "force"?)"},
      {"GET", "/v1/queues/t/schedule?buckets=1m", "", R"(did you mean "bucket"?)"},
      {"GET", "/v1/queues/t?verbose=1", "", "GET /v1/queues/{q} takes none"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.method + " " + c.target + " " + c.body);
    ExpectError(Call(c.method, c.target, c.body), 400, "invalid_argument", c.mention);
  }
  auto after = h_.queue().Stats("t");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->scheduled + after->ready, before->scheduled + before->ready);
  EXPECT_EQ(after->reserved, 1) << "the refused ack, nack and touch changed nothing";
  EXPECT_EQ(after->counters.enqueued, before->counters.enqueued) << "no refused enqueue stored a job";
  EXPECT_NE(J(Call("GET", "/v1/queues/t/config"))["max_attempts"], 1) << "the refused PUT changed nothing";
  EXPECT_EQ(Call("GET", "/v1/queues/t").status, 200) << "the refused DELETE deleted nothing";
}

// GET /jobs?state=S pages through a state; every bad query is a 400 that says what would be
// right, and the page answer always has "next_cursor" (null at the end).
TEST_F(ApiTest, BrowsingPagesAndRefusesBadStatesLimitsAndCursors) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Call("POST", "/v1/queues/b/jobs", R"({"payload":1,"delay":"1h"})").status, 201);
  auto first = Call("GET", "/v1/queues/b/jobs?state=scheduled&limit=2");
  ASSERT_EQ(first.status, 200) << first.body;
  ASSERT_EQ(J(first)["jobs"].size(), 2u);
  const std::string cursor = J(first)["next_cursor"];
  auto second = Call("GET", "/v1/queues/b/jobs?state=scheduled&limit=2&cursor=" + cursor);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(J(second)["jobs"].size(), 1u);
  EXPECT_TRUE(J(second)["next_cursor"].is_null()) << second.body;
  EXPECT_TRUE(J(Call("GET", "/v1/queues/b/dead"))["next_cursor"].is_null());
  const std::pair<std::string, std::string> cases[] = {
      {"/v1/queues/b/jobs", "give state=scheduled|ready|reserved|dead"},
      {"/v1/queues/b/jobs?state=sheduled", "give scheduled, ready, reserved, dead or completed"},
      {"/v1/queues/b/jobs?state=", "is not a job state"},
      {"/v1/queues/b/jobs?state=ready&key=k", "not both"},
      {"/v1/queues/b/jobs?state=ready&limit=0", "between 1 and 1000"},
      {"/v1/queues/b/jobs?state=ready&limit=1001", "between 1 and 1000"},
      {"/v1/queues/b/jobs?state=ready&limit=-1", "must be a number"},
      {"/v1/queues/b/jobs?state=ready&limit=99999999999", "must be a number"},
      {"/v1/queues/b/jobs?state=ready&cursor=" + cursor, "state=scheduled"},
      {"/v1/queues/b/jobs?state=scheduled&cursor=%00%ff%22", "cursor"},
      {"/v1/queues/b/jobs?state=scheduled&cursor=" + std::string(100'000, 'z'), "cursor"},
      {"/v1/queues/b/dead?cursor=" + cursor, "state=scheduled"},
  };
  for (const auto& [target, mention] : cases) {
    SCOPED_TRACE(target.substr(0, 120));
    auto r = Call("GET", target);
    ExpectError(r, 400, "invalid_argument", mention);
    EXPECT_LT(r.body.size(), 1000u) << "the error does not echo the whole input";
  }
  ExpectError(Call("GET", "/v1/queues/nope/jobs?state=ready"), 404, "not_found");
}

TEST_F(ApiTest, VersionAndBuildInfoSayWhatRuns) {
  json v = J(Call("GET", "/v1/version"));
  EXPECT_EQ(v["version"], std::string(Version()));
  EXPECT_EQ(v["commit"], std::string(Commit()));
  EXPECT_FALSE(v["commit"].get<std::string>().empty());
  EXPECT_EQ(v["store"], "embedded");
  EXPECT_TRUE(v.contains("durability"));
  const std::string metrics = Call("GET", "/metrics").body;
  EXPECT_NE(
      metrics.find(fmt::format(R"(delayq_build_info{{version="{}",commit="{}",store="embedded")", Version(), Commit())),
      std::string::npos)
      << metrics.substr(0, 400);
  for (const char* name : {"process_resident_memory_bytes ", "process_cpu_seconds_total ", "process_open_fds ",
                           "process_max_fds ", "process_start_time_seconds ", "process_virtual_memory_bytes "}) {
    const size_t at = metrics.find(std::string("\n") + name);
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_GT(std::stod(metrics.substr(at + 1 + std::string_view(name).size())), 0) << name;
  }
}

// process_cpu_seconds_total counts the CPU a process has used to the nanosecond: from clock ticks
// (10 ms) a fresh server read 0, and a benchmark's CPU per job came out in steps (CI failed on it).
TEST(ProcessFigures, CpuSecondsCountLessThanAClockTick) {
  const double before = http::ReadProcess().cpu_seconds;
  const auto start = std::chrono::steady_clock::now();
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2)) spin = spin + 1;
  const double after = http::ReadProcess().cpu_seconds;
  EXPECT_GT(before, 0);
  EXPECT_GT(after, before) << "2 ms of CPU are counted";
  EXPECT_LT(after - before, 1) << "the figure is in seconds";
}

// The alert rules and the Grafana dashboard in packaging/ name only metrics that /metrics has.
// (`promtool check rules` is not run: Debian's prometheus package starts a server on install.)
TEST_F(ApiTest, OperatorKitNamesOnlyExportedMetrics) {
  const std::string metrics = Call("GET", "/metrics").body;
  std::set<std::string> families;
  static const std::regex type_line("# TYPE ([a-z_]+) ");
  for (auto it = std::sregex_iterator(metrics.begin(), metrics.end(), type_line); it != std::sregex_iterator(); ++it) {
    families.insert((*it)[1]);
  }
  ASSERT_GT(families.size(), 15u);
  for (const char* file : {"/../packaging/prometheus/delayq-alerts.yml", "/../packaging/grafana/delayq.json"}) {
    const std::string text = ReadFile(std::string(DELAYQ_DOCS_DIR) + file);
    ASSERT_FALSE(text.empty()) << file;
    static const std::regex name("\\b((delayq|process)_[a-z_]+)");
    size_t seen = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it, ++seen) {
      std::string n = (*it)[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (n.ends_with(suffix) && !families.contains(n)) n.resize(n.size() - std::string_view(suffix).size());
      }
      EXPECT_TRUE(families.contains(n)) << file << " names " << n << ", which /metrics does not have";
    }
    EXPECT_GT(seen, 5u) << file;
  }
}

TEST_F(ApiTest, ReserveLimitsAndLongPoll) {
  ExpectError(Call("POST", "/v1/queues/r/reserve", R"({"max":0})"), 400, "invalid_argument", "max");
  ExpectError(Call("POST", "/v1/queues/r/reserve", R"({"max":1001})"), 400, "invalid_argument", "max");
  ExpectError(Call("POST", "/v1/queues/r/reserve", R"({"wait_ms":60001})"), 400, "invalid_argument", "wait_ms");
  ExpectError(Call("POST", "/v1/queues/r/reserve", R"({"lease_ms":999})"), 400, "invalid_argument", "lease_ms");
  ExpectError(Call("POST", "/v1/queues/r/reserve", R"({"max":"1"})"), 400, "invalid_argument", "max");
  auto empty = Call("POST", "/v1/queues/r/reserve", "");
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(J(empty)["jobs"].size(), 0u);

  // A long poll is answered by the enqueue, without the calling thread waiting.
  std::promise<http::HttpResponse> p;
  auto f = p.get_future();
  auto cancel = api_.Handle({"POST", "/v1/queues/r/reserve", "", R"({"wait_ms":20000})", "application/json"},
                            [&p](http::HttpResponse r) { p.set_value(std::move(r)); });
  EXPECT_TRUE(cancel) << "a waiting reserve can be abandoned";
  EXPECT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(api_.metrics().waiting.load(), 1);
  ASSERT_EQ(Call("POST", "/v1/queues/r/jobs", R"({"payload":"wake"})").status, 201);
  auto answer = f.get();
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(J(answer)["jobs"][0]["payload"], "wake");
  EXPECT_EQ(api_.metrics().waiting.load(), 0);

  // Abandoned (the client hung up): answered empty, nothing reserved.
  std::promise<http::HttpResponse> p2;
  auto f2 = p2.get_future();
  auto cancel2 = api_.Handle({"POST", "/v1/queues/r/reserve", "", R"({"wait_ms":20000})", "application/json"},
                             [&p2](http::HttpResponse r) { p2.set_value(std::move(r)); });
  cancel2();
  EXPECT_EQ(J(f2.get())["jobs"].size(), 0u);
}

// A client gone before its reserve is handled takes no job; one that leaves while its reserve
// waits (before the server noticed) does not keep the jobs taken for it: they are ready again at
// once, and the delivery that reached no one uses no attempt (Queue::ReleaseBatch).
TEST_F(ApiTest, JobsAreNotLeasedToAConsumerThatHungUp) {
  ASSERT_EQ(Call("POST", "/v1/queues/h/jobs", R"({"payload":"first"})").status, 201);
  std::atomic<bool> gone{true};
  http::HttpRequest req{"POST", "/v1/queues/h/reserve", "", R"({"max":5})", "application/json"};
  req.peer_closed = [&gone] { return gone.load(); };
  std::promise<http::HttpResponse> p;
  api_.Handle(req, [&p](http::HttpResponse r) { p.set_value(std::move(r)); });
  EXPECT_EQ(J(p.get_future().get())["jobs"].size(), 0u);
  EXPECT_EQ(J(Call("GET", "/v1/queues/h"))["ready"], 1);

  ASSERT_EQ(J(Call("POST", "/v1/queues/h/reserve", R"({"max":5})"))["jobs"].size(), 1u);  // now held
  gone = false;
  req.body = R"({"max":5,"wait_ms":20000})";
  std::promise<http::HttpResponse> p2;
  auto f2 = p2.get_future();
  auto cancel = api_.Handle(req, [&p2](http::HttpResponse r) { p2.set_value(std::move(r)); });
  ASSERT_TRUE(cancel);
  gone = true;  // the client leaves; the server has not noticed yet
  auto e = Call("POST", "/v1/queues/h/jobs", R"({"payload":"second"})");
  ASSERT_EQ(e.status, 201);
  EXPECT_EQ(J(f2.get())["jobs"].size(), 0u);
  auto job = J(Call("GET", "/v1/queues/h/jobs/" + J(e)["id"].get<std::string>()));
  EXPECT_EQ(job["state"], "ready");
  EXPECT_EQ(job["attempt"], 0) << "the delivery that reached no one used no attempt: " << job;
  auto again = J(Call("POST", "/v1/queues/h/reserve", R"({"max":5})"));
  ASSERT_EQ(again["jobs"].size(), 1u);
  EXPECT_EQ(again["jobs"][0]["payload"], "second");
  EXPECT_EQ(again["jobs"][0]["attempt"], 1);
}

// An answer the transport could not write (HttpResponse::unwritten) gives a reserve's jobs back,
// unused: found over HTTPS, where such reserves counted "delivered 8, redelivered 8" while the
// worker received nothing, and their jobs burned their attempts.
TEST_F(ApiTest, AReserveWhoseAnswerCouldNotBeWrittenGivesItsJobsBack) {
  ASSERT_EQ(Call("POST", "/v1/queues/u/jobs", R"({"payload":"a"})").status, 201);
  ASSERT_EQ(Call("POST", "/v1/queues/u/jobs", R"({"payload":"b"})").status, 201);
  std::promise<http::HttpResponse> p;
  api_.Handle({"POST", "/v1/queues/u/reserve", "", R"({"max":5})", "application/json"},
              [&p](http::HttpResponse r) { p.set_value(std::move(r)); });
  http::HttpResponse lost = p.get_future().get();
  ASSERT_EQ(J(lost)["jobs"].size(), 2u);
  ASSERT_TRUE(lost.unwritten) << "a reserve's answer says how to give its jobs back";
  lost.unwritten();  // what the transport does when the write fails
  auto stats = J(Call("GET", "/v1/queues/u"));
  EXPECT_EQ(stats["ready"], 2);
  EXPECT_EQ(stats["reserved"], 0);
  EXPECT_EQ(stats["counters"]["delivered"], 0);
  auto again = J(Call("POST", "/v1/queues/u/reserve", R"({"max":5})"));
  ASSERT_EQ(again["jobs"].size(), 2u);
  for (const auto& j : again["jobs"]) EXPECT_EQ(j["attempt"], 1);
  // An empty answer has nothing to give back.
  std::promise<http::HttpResponse> none;
  api_.Handle({"POST", "/v1/queues/u/reserve", "", R"({"max":5})", "application/json"},
              [&none](http::HttpResponse r) { none.set_value(std::move(r)); });
  EXPECT_FALSE(none.get_future().get().unwritten);
}

// POST /release: a worker gives back what it took and did not begin.
TEST_F(ApiTest, ReleaseGivesBackDeliveriesOneOrABatch) {
  ASSERT_EQ(Call("POST", "/v1/queues/g/jobs", R"({"jobs":[{"payload":1},{"payload":2},{"payload":3}]})").status, 201);
  auto got = J(Call("POST", "/v1/queues/g/reserve", R"({"max":3})"));
  ASSERT_EQ(got["jobs"].size(), 3u);
  const std::string r0 = got["jobs"][0]["receipt"], r1 = got["jobs"][1]["receipt"], r2 = got["jobs"][2]["receipt"];
  auto one = Call("POST", "/v1/queues/g/release", R"({"receipt":")" + r0 + R"("})");
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(J(one)["released"], 1);
  EXPECT_EQ(Call("POST", "/v1/queues/g/release", R"({"receipt":")" + r0 + R"("})").status, 409);
  auto batch =
      Call("POST", "/v1/queues/g/release", R"({"receipts":[")" + r1 + R"(",")" + r2 + R"(",")" + r0 + R"(","bad"]})");
  EXPECT_EQ(batch.status, 200);
  EXPECT_EQ(J(batch)["released"], 2);
  EXPECT_EQ(J(batch)["failed"].size(), 2u);
  EXPECT_EQ(Call("POST", "/v1/queues/g/release", R"({"receipt":")" + r0 + R"(","lease_ms":5})").status, 400)
      << "unknown field";
  EXPECT_EQ(J(Call("GET", "/v1/queues/g"))["ready"], 3);
}

TEST_F(ApiTest, AckNackTouchSingleAndBatch) {
  for (int i = 0; i < 3; ++i) Call("POST", "/v1/queues/a/jobs", R"({"payload":1,"max_attempts":2})");
  json jobs = J(Call("POST", "/v1/queues/a/reserve", R"({"max":3})"))["jobs"];
  ASSERT_EQ(jobs.size(), 3u);
  std::string r0 = jobs[0]["receipt"], r1 = jobs[1]["receipt"], r2 = jobs[2]["receipt"];
  auto n = Call("POST", "/v1/queues/a/nack", R"({"receipt":")" + r0 + R"(","retry_in_ms":5000,"error":"timeout"})");
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(J(n)["state"], "scheduled");
  EXPECT_EQ(J(n)["due_at"], h_.NowMs() + 5000);
  auto d = Call("POST", "/v1/queues/a/nack", R"({"receipt":")" + r1 + R"(","dead":true})");
  EXPECT_EQ(J(d)["state"], "dead");
  auto batch = Call("POST", "/v1/queues/a/ack", R"({"receipts":[")" + r2 + R"(",")" + r0 + R"(","garbage"]})");
  ASSERT_EQ(batch.status, 200) << batch.body;
  json b = J(batch);
  EXPECT_EQ(b["acked"], 1);
  ASSERT_EQ(b["failed"].size(), 2u);
  EXPECT_EQ(b["failed"][0]["receipt"], r0);
  EXPECT_EQ(b["failed"][0]["code"], "lease_expired");
  EXPECT_EQ(b["failed"][1]["code"], "invalid_argument");
  ExpectError(Call("POST", "/v1/queues/a/ack", R"({"receipt":")" + r0 + R"("})"), 409, "lease_expired");
  ExpectError(Call("POST", "/v1/queues/a/ack", R"({"receipt":"nope"})"), 400, "invalid_argument", "receipt");
  ExpectError(Call("POST", "/v1/queues/a/ack", R"({})"), 400, "invalid_argument", "receipt");
  ExpectError(Call("POST", "/v1/queues/a/ack", R"({"receipts":"x"})"), 400, "invalid_argument", "receipts");
  ExpectError(Call("POST", "/v1/queues/a/touch", R"({"receipt":")" + r2 + R"("})"), 404, "not_found");
  ExpectError(Call("POST", "/v1/queues/a/nack", R"({"receipt":")" + r0 + R"(","retry_in_ms":"soon"})"), 400,
              "invalid_argument", "retry_in_ms");
}

// A touch's progress (SPEC §11.3): any JSON value, kept as written and shown on the job while its
// delivery holds it; a batch touch reports it for every receipt; null is none; a bad one is
// refused with a 400 naming it, and the touch does nothing.
TEST_F(ApiTest, ATouchReportsProgressShownOnTheJob) {
  for (int i = 0; i < 2; ++i) Call("POST", "/v1/queues/p/jobs", R"({"payload":1})");
  json jobs = J(Call("POST", "/v1/queues/p/reserve", R"({"max":2})"))["jobs"];
  ASSERT_EQ(jobs.size(), 2u);
  const std::string r0 = jobs[0]["receipt"], r1 = jobs[1]["receipt"];
  const std::string id0 = jobs[0]["id"], id1 = jobs[1]["id"];
  EXPECT_TRUE(J(Call("GET", "/v1/queues/p/jobs/" + id0))["progress"].is_null());
  auto t = Call("POST", "/v1/queues/p/touch", R"({"receipt":")" + r0 + R"(","progress":{"rows": 120, "of": 1e3}})");
  ASSERT_EQ(t.status, 200) << t.body;
  auto got = Call("GET", "/v1/queues/p/jobs/" + id0);
  EXPECT_NE(got.body.find(R"("progress":{"rows": 120, "of": 1e3})"), std::string::npos) << "as written: " << got.body;
  auto both = Call("POST", "/v1/queues/p/touch", R"({"receipts":[")" + r0 + R"(",")" + r1 + R"("],"progress":"half"})");
  ASSERT_EQ(both.status, 200) << both.body;
  EXPECT_EQ(J(both)["touched"], 2);
  json listed = J(Call("GET", "/v1/queues/p/jobs?state=reserved"))["jobs"];
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0]["progress"], "half");
  EXPECT_EQ(listed[1]["progress"], "half");
  ASSERT_EQ(Call("POST", "/v1/queues/p/touch", R"({"receipt":")" + r1 + R"(","progress":null})").status, 200);
  EXPECT_EQ(J(Call("GET", "/v1/queues/p/jobs/" + id1))["progress"], "half") << "null is none: the last one stays";

  const std::string big = R"({"receipt":")" + r0 + R"(","progress":")" + std::string(5000, 'x') + R"("})";
  auto refused = Call("POST", "/v1/queues/p/touch", big);
  ExpectError(refused, 400, "invalid_argument", "progress is 5002 bytes of JSON; at most 4096");
  EXPECT_LT(refused.body.size(), 400u) << "the value is not echoed";
  ExpectError(Call("POST", "/v1/queues/p/touch", R"({"receipt":")" + r0 + R"(","progress":[1,)"), 400,
              "invalid_argument");
  const std::string big_batch =
      R"({"receipts":[")" + r0 + R"(",")" + r1 + R"("],"progress":")" + std::string(5000, 'x') + R"("})";
  ExpectError(Call("POST", "/v1/queues/p/touch", big_batch), 400, "invalid_argument", "progress is 5002 bytes");
  EXPECT_EQ(J(Call("GET", "/v1/queues/p/jobs/" + id0))["progress"], "half") << "a refused touch changed nothing";
  ASSERT_EQ(Call("POST", "/v1/queues/p/ack", R"({"receipt":")" + r0 + R"("})").status, 200);
  ExpectError(Call("POST", "/v1/queues/p/touch", R"({"receipt":")" + r0 + R"(","progress":1})"), 404, "not_found");
}

// Completed jobs kept (keep_completed_ms) with their results, over raw HTTP: the config field, an
// ack's result (single and in batch entries), the job's completed_at and result, the listing, the
// stats and metrics, and the refusals, before anything is acked.
TEST_F(ApiTest, AnAckKeepsItsResultOnACompletedJob) {
  auto config = Call("PUT", "/v1/queues/done/config", R"({"keep_completed_ms": 3600000})");
  ASSERT_EQ(config.status, 200) << config.body;
  EXPECT_EQ(J(config)["keep_completed_ms"], 3600000);
  ExpectError(Call("PUT", "/v1/queues/done/config", R"({"keep_completed_ms": 2592000001})"), 400, "invalid_argument",
              "keep_completed_ms");
  ExpectError(Call("PUT", "/v1/queues/done/config", R"({"keep_completed_ms": -1})"), 400, "invalid_argument",
              "keep_completed_ms");
  for (int i = 0; i < 3; ++i) Call("POST", "/v1/queues/done/jobs", R"({"payload":1})");
  json jobs = J(Call("POST", "/v1/queues/done/reserve", R"({"max":3})"))["jobs"];
  ASSERT_EQ(jobs.size(), 3u);
  const std::string r0 = jobs[0]["receipt"], r1 = jobs[1]["receipt"], r2 = jobs[2]["receipt"];
  const std::string id0 = jobs[0]["id"], id1 = jobs[1]["id"], id2 = jobs[2]["id"];

  const std::string big = R"({"receipt":")" + r0 + R"(","result":")" + std::string(70'000, 'x') + R"("})";
  auto refused = Call("POST", "/v1/queues/done/ack", big);
  ExpectError(refused, 400, "invalid_argument", "result is 70002 bytes of JSON; at most 65536");
  EXPECT_LT(refused.body.size(), 400u) << "the value is not echoed";
  ExpectError(
      Call("POST", "/v1/queues/done/ack", R"({"receipts":[")" + r0 + R"(",{"receipt":")" + r1 + R"(","result":[1,}]})"),
      400, "invalid_argument");
  EXPECT_EQ(J(Call("GET", "/v1/queues/done/jobs/" + id0))["state"], "reserved") << "a refused ack acked nothing";

  auto one = Call("POST", "/v1/queues/done/ack", R"({"receipt":")" + r0 + R"(","result":{"charged": 1999, "e": 1e3}})");
  ASSERT_EQ(one.status, 200) << one.body;
  auto batch = Call("POST", "/v1/queues/done/ack",
                    R"({"receipts":[")" + r1 + R"(",{"receipt":")" + r2 + R"(","result":"fine"},"bogus"]})");
  ASSERT_EQ(batch.status, 200) << batch.body;
  EXPECT_EQ(J(batch)["acked"], 2);
  EXPECT_EQ(J(batch)["failed"].size(), 1u);

  auto got = Call("GET", "/v1/queues/done/jobs/" + id0);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(J(got)["state"], "completed");
  EXPECT_TRUE(J(got)["completed_at"].is_number());
  EXPECT_NE(got.body.find(R"("result":{"charged": 1999, "e": 1e3})"), std::string::npos) << "as written: " << got.body;
  EXPECT_TRUE(J(Call("GET", "/v1/queues/done/jobs/" + id1))["result"].is_null());
  json listed = J(Call("GET", "/v1/queues/done/jobs?state=completed&limit=2"));
  ASSERT_EQ(listed["jobs"].size(), 2u);
  EXPECT_FALSE(listed["next_cursor"].is_null());
  json rest = J(Call("GET", "/v1/queues/done/jobs?state=completed&cursor=" + listed["next_cursor"].get<std::string>()));
  ASSERT_EQ(rest["jobs"].size(), 1u);
  EXPECT_EQ(J(Call("GET", "/v1/queues/done"))["completed"], 3);
  EXPECT_NE(Call("GET", "/metrics").body.find(R"(delayq_jobs{queue="done",state="completed"} 3)"), std::string::npos);
  ExpectError(Call("POST", "/v1/queues/done/ack", R"({"receipt":")" + r0 + R"("})"), 404, "not_found");
  ExpectError(Call("PATCH", "/v1/queues/done/jobs/" + id0, R"({"delay_ms":0})"), 409, "conflict", "completed");
  ASSERT_EQ(Call("DELETE", "/v1/queues/done/jobs/" + id0).status, 200);
  ExpectError(Call("GET", "/v1/queues/done/jobs/" + id0), 404, "not_found");
  EXPECT_EQ(J(Call("DELETE", "/v1/queues/done"))["deleted"], true) << "completed jobs do not keep a queue";
}

// A request's object that names a field twice is refused before anything is done: the receipts
// parser took every "receipt", so an ack answered 400 for the first had acked the second. The
// values kept as written (payload, progress) keep their duplicates.
TEST_F(ApiTest, AFieldGivenTwiceIsRefusedAndChangesNothing) {
  Call("POST", "/v1/queues/twice/jobs", R"({"payload":1})");
  json jobs = J(Call("POST", "/v1/queues/twice/reserve", R"({"max":1})"))["jobs"];
  ASSERT_EQ(jobs.size(), 1u);
  const std::string r = jobs[0]["receipt"], id = jobs[0]["id"];
  ExpectError(Call("POST", "/v1/queues/twice/ack", R"({"receipt":"bogus","receipt":")" + r + R"("})"), 400,
              "invalid_argument", R"(the field "receipt" is given twice)");
  ExpectError(Call("POST", "/v1/queues/twice/touch", R"({"receipt":")" + r + R"(","progress":1,"progress":2})"), 400,
              "invalid_argument", R"("progress" is given twice)");
  EXPECT_EQ(J(Call("GET", "/v1/queues/twice/jobs/" + id))["state"], "reserved") << "not acked";
  ExpectError(
      Call("POST", "/v1/queues/twice/jobs", R"({"jobs":[{"payload":1},{"payload":2,"headers":{"a":"1","a":"2"}}]})"),
      400, "invalid_argument", R"("jobs[1].headers.a" is given twice)");
  ExpectError(Call("PUT", "/v1/queues/twice/config", R"({"lease_ms":5000,"lease_ms":60000})"), 400, "invalid_argument",
              "lease_ms");
  auto kept = Call("POST", "/v1/queues/twice/jobs", R"({"payload":{"a":1,"a":2}})");
  ASSERT_EQ(kept.status, 201) << kept.body;
  EXPECT_NE(Call("GET", "/v1/queues/twice/jobs/" + J(kept)["id"].get<std::string>()).body.find(R"({"a":1,"a":2})"),
            std::string::npos)
      << "a payload is kept as written";
  ASSERT_EQ(Call("POST", "/v1/queues/twice/touch", R"({"receipt":")" + r + R"(","progress":{"s":1,"s":2}})").status,
            200);
  EXPECT_NE(Call("GET", "/v1/queues/twice/jobs/" + id).body.find(R"("progress":{"s":1,"s":2})"), std::string::npos);
}

TEST_F(ApiTest, CancelRescheduleDeadAndQueues) {
  std::string id = J(Call("POST", "/v1/queues/c/jobs", R"({"payload":1,"delay":"1h","key":"k"})"))["id"];
  auto p = Call("PATCH", "/v1/queues/c/jobs/" + id, R"({"delay":"2h"})");
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(J(p)["due_at"], h_.NowMs() + 7'200'000);
  ExpectError(Call("PATCH", "/v1/queues/c/jobs/" + id, R"({})"), 400, "invalid_argument", "delay");
  EXPECT_EQ(J(Call("PATCH", "/v1/queues/c/jobs?key=k", R"({"delay_ms":1000})"))["due_at"], h_.NowMs() + 1000);
  auto del = Call("DELETE", "/v1/queues/c/jobs?key=k");
  EXPECT_EQ(del.status, 200);
  EXPECT_EQ(J(del)["cancelled"], true);
  ExpectError(Call("DELETE", "/v1/queues/c/jobs/" + id), 404, "not_found");
  ExpectError(Call("GET", "/v1/queues/c/jobs/not-an-id"), 400, "invalid_argument", "id");

  std::string r = J(Call("POST", "/v1/queues/c/jobs", R"({"payload":2})"))["id"];
  Call("POST", "/v1/queues/c/reserve", "");
  ExpectError(Call("DELETE", "/v1/queues/c/jobs/" + r), 409, "conflict");
  ExpectError(Call("PATCH", "/v1/queues/c/jobs/" + r, R"({"delay":"1s"})"), 409, "conflict");

  // Dead letters: list, replay, purge.
  for (int i = 0; i < 2; ++i) Call("POST", "/v1/queues/dl/jobs", R"({"payload":1,"max_attempts":1})");
  json reserved = J(Call("POST", "/v1/queues/dl/reserve", R"({"max":2})"));
  for (const auto& j : reserved["jobs"]) {
    Call("POST", "/v1/queues/dl/nack", R"({"receipt":")" + j["receipt"].get<std::string>() + R"(","error":"boom"})");
  }
  json dead = J(Call("GET", "/v1/queues/dl/dead?limit=10"))["jobs"];
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0]["state"], "dead");
  EXPECT_EQ(dead[0]["last_error"], "boom");
  ExpectError(Call("GET", "/v1/queues/dl/dead?limit=0"), 400, "invalid_argument", "limit");
  ExpectError(Call("GET", "/v1/queues/dl/dead?limit=x"), 400, "invalid_argument", "limit");
  auto rp = Call("POST", "/v1/queues/dl/dead/replay", R"({"ids":[")" + dead[0]["id"].get<std::string>() + R"("]})");
  EXPECT_EQ(J(rp)["replayed"], 1);
  EXPECT_EQ(J(Call("DELETE", "/v1/queues/dl/dead"))["purged"], 1);
  EXPECT_EQ(J(Call("POST", "/v1/queues/dl/dead/replay", ""))["replayed"], 0);

  // Queue stats, list, config, pause/resume, schedule.
  json st = J(Call("GET", "/v1/queues/dl"));
  for (const char* field : {"name", "scheduled", "ready", "reserved", "dead", "due_next_60s", "earliest_due_at",
                            "oldest_ready_ms", "counters", "lateness_ms"}) {
    EXPECT_TRUE(st.contains(field)) << field;
  }
  for (const char* field : {"enqueued", "delivered", "acked", "nacked", "redelivered", "dead"}) {
    EXPECT_TRUE(st["counters"].contains(field)) << field;
  }
  for (const char* field : {"p50", "p99", "max"}) {
    EXPECT_TRUE(st["lateness_ms"].contains(field)) << field;
    EXPECT_TRUE(st["limit_wait_ms"].contains(field)) << field;
  }
  EXPECT_EQ(st["ready"], 1);
  json list = J(Call("GET", "/v1/queues"))["queues"];
  EXPECT_GE(list.size(), 2u);
  auto cfg = Call("PUT", "/v1/queues/dl/config", R"({"max_attempts":9,"backoff":{"base_ms":250}})");
  ASSERT_EQ(cfg.status, 200) << cfg.body;
  EXPECT_EQ(J(cfg)["max_attempts"], 9);
  EXPECT_EQ(J(Call("GET", "/v1/queues/dl/config"))["backoff"]["base_ms"], 250);
  ExpectError(Call("PUT", "/v1/queues/dl/config", R"({"backoff":{"jitter":5}})"), 400, "invalid_argument", "jitter");
  auto limits = Call("PUT", "/v1/queues/dl/config", R"({"rate_per_s":0.5,"burst":3,"max_reserved":7})");
  ASSERT_EQ(limits.status, 200) << limits.body;
  json got_limits = J(Call("GET", "/v1/queues/dl/config"));
  EXPECT_EQ(got_limits["rate_per_s"], 0.5);
  EXPECT_EQ(got_limits["burst"], 3);
  EXPECT_EQ(got_limits["max_reserved"], 7);
  EXPECT_EQ(got_limits["max_attempts"], 9) << "fields left out keep theirs";
  ASSERT_EQ(Call("PUT", "/v1/queues/dl/config", R"({"rate_per_s":0,"burst":0,"max_reserved":0})").status, 200);
  EXPECT_EQ(J(Call("POST", "/v1/queues/dl/pause"))["paused"], true);
  EXPECT_EQ(J(Call("POST", "/v1/queues/dl/reserve", ""))["jobs"].size(), 0u);
  EXPECT_EQ(J(Call("POST", "/v1/queues/dl/resume"))["paused"], false);
  EXPECT_EQ(J(Call("POST", "/v1/queues/dl/reserve", ""))["jobs"].size(), 1u);
  Call("POST", "/v1/queues/s/jobs", R"({"payload":1,"delay":"10m"})");
  json sched = J(Call("GET", "/v1/queues/s/schedule?bucket=1m&horizon=1h"));
  ASSERT_EQ(sched["buckets"].size(), 60u);
  EXPECT_EQ(sched["buckets"][10], 1);
  ExpectError(Call("GET", "/v1/queues/s/schedule?bucket=10s"), 400, "invalid_argument", "bucket");
}

TEST_F(ApiTest, RoutesMethodsHealthAndMetrics) {
  ExpectError(Call("GET", "/nope"), 404, "not_found");
  ExpectError(Call("GET", "/v1/queues/q/nope"), 404, "not_found");
  auto m = Call("PUT", "/v1/queues/q/jobs/01JDQ8Z3K6T6V3W1C9X2N4M5PQ");
  ExpectError(m, 405, "method_not_allowed");
  EXPECT_EQ(m.headers.at(0).first, "Allow");
  ExpectError(Call("GET", "/v1/queues/q/reserve"), 405, "method_not_allowed");
  ExpectError(Call("POST", "/v1/queues"), 405, "method_not_allowed");
  EXPECT_EQ(Call("GET", "/healthz").status, 200);
  EXPECT_EQ(Call("GET", "/readyz").status, 200);
  EXPECT_EQ(Call("GET", "/").status, 200);
  Call("POST", "/v1/queues/m/jobs", R"({"payload":1})");
  Call("POST", "/v1/queues/m/reserve", "");
  auto metrics = Call("GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.content_type.rfind("text/plain", 0), 0u);
  for (const char* needle :
       {"delayq_jobs{queue=\"m\",state=\"reserved\"} 1", "delayq_jobs_enqueued_total{queue=\"m\"} 1",
        "delayq_jobs_delivered_total{queue=\"m\"} 1", "delayq_jobs_acked_total{queue=\"m\"} 0",
        "delayq_jobs_nacked_total", "delayq_jobs_redelivered_total", "delayq_jobs_dead_total",
        "delayq_delivery_lateness_seconds_bucket{queue=\"m\",le=\"+Inf\"} 1",
        "delayq_http_request_duration_seconds_bucket{route=\"POST /v1/queues/{q}/reserve\"",
        "delayq_process_resident_memory_bytes"}) {
    EXPECT_NE(metrics.body.find(needle), std::string::npos) << needle;
  }
  EXPECT_EQ(metrics.body.find("delayq_limit_wait_seconds_bucket{queue=\"m\""), std::string::npos)
      << "no limit-wait series for a queue no limit held back";
  // A queue whose rate held a job back has its limit-wait series.
  ASSERT_EQ(Call("PUT", "/v1/queues/lim/config", R"({"rate_per_s":1,"burst":1})").status, 200);
  Call("POST", "/v1/queues/lim/jobs", R"({"jobs":[{"payload":1},{"payload":2}]})");
  EXPECT_EQ(J(Call("POST", "/v1/queues/lim/reserve", R"({"max":2})"))["jobs"].size(), 1u) << "the limit holds one back";
  h_.Advance(1000);
  EXPECT_EQ(J(Call("POST", "/v1/queues/lim/reserve", R"({"max":2})"))["jobs"].size(), 1u);
  const std::string with_limit = Call("GET", "/metrics").body;
  EXPECT_NE(with_limit.find("delayq_limit_wait_seconds_bucket{queue=\"lim\",le=\"+Inf\"} 1"), std::string::npos);
  EXPECT_NE(with_limit.find("delayq_limit_wait_seconds_bucket{queue=\"lim\",le=\"0.5\"} 0"), std::string::npos)
      << "it waited a second for its token";
  EXPECT_NE(with_limit.find("delayq_limit_wait_seconds_bucket{queue=\"lim\",le=\"2.5\"} 1"), std::string::npos)
      << "it waited a second for its token";
}

// /metrics grew to 36 MiB for 20 000 queues. Per-queue series stop at kMaxQueueSeries queues
// (those holding the most jobs); the rest are summed into queue="(other)", and no job goes
// uncounted.
TEST_F(ApiTest, MetricsPerQueueAreBounded) {
  for (int i = 0; i < 600; ++i) {
    ASSERT_EQ(Call("POST", "/v1/queues/m" + std::to_string(i) + "/jobs", R"({"payload":1})").status, 201);
  }
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Call("POST", "/v1/queues/m7/jobs", R"({"payload":1})").status, 201);
  auto m = Call("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  std::set<std::string> queues;
  int64_t ready = 0;
  const std::string prefix = "delayq_jobs{queue=\"";
  for (size_t at = 0; (at = m.body.find(prefix, at)) != std::string::npos; ++at) {
    const size_t end = m.body.find('"', at + prefix.size());
    queues.insert(m.body.substr(at + prefix.size(), end - at - prefix.size()));
    const size_t line_end = m.body.find('\n', at);
    if (m.body.substr(end, line_end - end).find("state=\"ready\"") != std::string::npos) {
      ready += std::stoll(m.body.substr(m.body.rfind(' ', line_end) + 1, line_end));
    }
  }
  EXPECT_EQ(queues.size(), http::Metrics::kMaxQueueSeries);
  EXPECT_TRUE(queues.contains("(other)"));
  EXPECT_TRUE(queues.contains("m7")) << "the queue holding the most jobs has its own series";
  EXPECT_EQ(ready, 603) << "a job went uncounted";
  EXPECT_LT(m.body.size(), 1u << 20);
}

TEST_F(ApiTest, DeleteQueueRoute) {
  ExpectError(Call("DELETE", "/v1/queues/gone"), 404, "not_found", "gone");
  ASSERT_EQ(Call("POST", "/v1/queues/del/jobs", R"({"payload":1})").status, 201);
  ExpectError(Call("DELETE", "/v1/queues/del"), 409, "conflict", "force=true");
  ExpectError(Call("DELETE", "/v1/queues/del?force=yes"), 400, "invalid_argument", "force");
  auto forced = Call("DELETE", "/v1/queues/del?force=true");
  ASSERT_EQ(forced.status, 200) << forced.body;
  EXPECT_EQ(J(forced)["deleted"], true);
  EXPECT_EQ(J(forced)["jobs"], 1);
  ExpectError(Call("GET", "/v1/queues/del"), 404, "not_found");
  auto wrong = Call("POST", "/v1/queues/del");
  EXPECT_EQ(wrong.status, 405);
}

TEST_F(ApiTest, HistoryKeepsRecentSamplesPerQueue) {
  Call("POST", "/v1/queues/hist/jobs", R"({"payload":1})");
  auto stats = h_.queue().ListQueues();
  ASSERT_TRUE(stats.ok());
  api_.history().Add(1000, *stats);
  api_.history().Add(11000, *stats);
  json all = J(Call("GET", "/v1/history"));
  EXPECT_EQ(all["interval_ms"], 10000);
  ASSERT_EQ(all["queues"]["hist"].size(), 2u);
  EXPECT_EQ(all["queues"]["hist"][1][0], 11000);  // t
  EXPECT_EQ(all["queues"]["hist"][1][2], 1);      // ready
  EXPECT_EQ(all["queues"]["hist"][1][5], 1);      // enqueued
  json one = J(Call("GET", "/v1/history?queue=hist&queue=nope"));
  EXPECT_EQ(one["queues"].size(), 1u);
  ExpectError(Call("POST", "/v1/history"), 405, "method_not_allowed");
}

// A web page must not drive delayq through a browser (it enqueued and paused with no token):
// DNS rebinding (a foreign Host), a foreign Origin, and bodies that are not JSON are refused,
// and nothing changes.
TEST(ApiBrowserGuard, ForeignHostsOriginsAndNonJsonBodiesAreRefused) {
  EngineHarness h;
  http::ApiOptions o;
  o.allowed_hosts = {"delayq.internal"};
  http::Api api(h.queue(), o);
  auto call = [&](std::string method, std::string target, std::string content_type, std::string host,
                  std::string origin, std::string body = "") {
    http::HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.content_type = std::move(content_type);
    r.host = std::move(host);
    r.origin = std::move(origin);
    r.body = std::move(body);
    std::promise<http::HttpResponse> p;
    auto f = p.get_future();
    api.Handle(std::move(r), [&p](http::HttpResponse resp) { p.set_value(std::move(resp)); });
    return f.get();
  };
  const std::string job = R"({"payload":1})", jobs = "/v1/queues/g/jobs";
  // What the issue saw: text/plain, a foreign Origin and Host.
  auto attack = call("POST", jobs, "text/plain", "evil.example", "http://evil.example", job);
  EXPECT_EQ(attack.status, 403) << attack.body;
  EXPECT_NE(attack.body.find("forbidden"), std::string::npos);
  EXPECT_EQ(call("POST", jobs, "text/plain", "127.0.0.1:7070", "http://evil.example", job).status, 403);
  EXPECT_EQ(call("POST", jobs, "application/json", "127.0.0.1:7070", "null", job).status, 403);
  auto plain = call("POST", jobs, "text/plain", "127.0.0.1:7070", "", job);
  EXPECT_EQ(plain.status, 415) << plain.body;
  EXPECT_NE(plain.body.find("Content-Type: application/json"), std::string::npos) << plain.body;
  EXPECT_EQ(call("POST", "/v1/queues/g/pause", "", "localhost:7070", "").status, 415) << "a form could pause";
  EXPECT_EQ(call("POST", "/v1/queues/g/pause", "application/x-www-form-urlencoded", "localhost", "").status, 415);
  EXPECT_EQ(call("GET", "/v1/queues", "", "rebound.example:7070", "").status, 403) << "DNS rebinding reads too";
  EXPECT_EQ(h.queue().Stats("g").code(), Code::kNotFound) << "a refused request changed something";
  // What is allowed: no Origin (not a browser), the dashboard's own origin, IP literals,
  // localhost, --allowed-hosts, JSON with parameters, GET without a content type.
  EXPECT_EQ(call("POST", jobs, "application/json", "127.0.0.1:7070", "", job).status, 201);
  EXPECT_EQ(call("POST", jobs, "Application/JSON; charset=utf-8", "[::1]:7070", "http://[::1]:7070", job).status, 201);
  EXPECT_EQ(call("POST", jobs, "application/json", "localhost:7070", "http://localhost:7070", job).status, 201);
  EXPECT_EQ(call("POST", jobs, "application/json", "Delayq.Internal", "http://delayq.internal", job).status, 201);
  EXPECT_EQ(call("POST", "/v1/queues/g/pause", "application/json", "10.1.2.3:7070", "").status, 200);
  EXPECT_EQ(call("GET", "/v1/queues/g", "", "", "").status, 200) << "no Host (HTTP/1.0 tools)";
  EXPECT_EQ(call("DELETE", "/v1/queues/g/dead", "", "127.0.0.1", "").status, 200) << "DELETE needs no body";
}

TEST(ApiAuth, BearerTokenOnEverythingButHealthz) {
  EngineHarness h;
  http::ApiOptions o;
  o.auth_token = "s3cret";
  http::Api api(h.queue(), o);
  auto call = [&](const std::string& target, const std::string& auth) {
    std::promise<http::HttpResponse> p;
    auto f = p.get_future();
    api.Handle({"GET", target, auth, ""}, [&p](http::HttpResponse r) { p.set_value(std::move(r)); });
    return f.get();
  };
  EXPECT_EQ(call("/healthz", "").status, 200);
  EXPECT_EQ(call("/", "").status, 200) << "the dashboard page loads, then asks for the token";
  EXPECT_EQ(call("/v1/queues", "").status, 401);
  EXPECT_EQ(call("/metrics", "").status, 401);
  EXPECT_EQ(call("/v1/queues", "Bearer wrong").status, 401);
  EXPECT_EQ(call("/v1/queues", "Bearer s3cret").status, 200);
  EXPECT_NE(call("/v1/queues", "").body.find("unauthenticated"), std::string::npos);
}

// The route table is the one list of routes: docs/http-api.md's table lists each of them, and
// nothing else, and the dispatch answers each one (never "no such route").
// GET /openapi.json answers docs/openapi.yaml, and it names every route the server answers with
// its query parameters, and nothing else (tests/openapi checks the schemas against the answers).
TEST_F(ApiTest, OpenApiNamesEveryRouteWithItsQueryParametersAndNothingElse) {
  auto r = Call("GET", "/openapi.json");
  ASSERT_EQ(r.status, 200);
  const json doc = json::parse(r.body, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["openapi"], "3.1.0");
  EXPECT_EQ(doc["info"]["version"], Version()) << "the build writes the project's version in";
  std::set<std::string> routes;
  for (const auto& route : http::Routes()) {
    std::string method(route.method);
    for (char& ch : method) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const std::string pattern(route.pattern);
    routes.insert(method + " " + pattern);
    ASSERT_TRUE(doc["paths"].contains(pattern)) << pattern << " is not in docs/openapi.yaml";
    ASSERT_TRUE(doc["paths"][pattern].contains(method))
        << route.method << " " << pattern << " is not in docs/openapi.yaml";
    std::set<std::string> documented, taken;
    for (const auto& p : doc["paths"][pattern][method].value("parameters", json::array())) {
      json param = p;
      if (p.contains("$ref")) {  // "#/components/parameters/X"
        const std::string ref = p["$ref"];
        param = doc["components"]["parameters"][ref.substr(ref.rfind('/') + 1)];
      }
      if (param["in"] == "query") documented.insert(param["name"]);
    }
    for (std::string_view q : http::QueryParams(route)) taken.insert(std::string(q));
    EXPECT_EQ(documented, taken) << route.method << " " << pattern << ": query parameters";
  }
  for (const auto& [path, item] : doc["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      if (method == "parameters") continue;
      EXPECT_TRUE(routes.contains(method + " " + path)) << method << " " << path << " is documented but not a route";
    }
  }
}

TEST(ApiRoutes, EveryRouteIsDocumentedAndAnswered) {
  using http::MatchRoute, http::RouteMatch, http::RouteName, http::Routes, http::Target;
  const std::string doc = ReadFile(std::string(DELAYQ_DOCS_DIR) + "/http-api.md");
  size_t rows = 0;
  for (size_t at = doc.find("\n| "); at != std::string::npos; at = doc.find("\n| ", at + 1)) {
    const std::string_view row(doc.data() + at + 3, doc.find('\n', at + 1) - at - 3);
    for (std::string_view m : {"GET ", "POST ", "PUT ", "PATCH ", "DELETE "}) rows += row.starts_with(m);
  }
  EXPECT_EQ(rows, Routes().size()) << "docs/http-api.md lists routes the table does not have, or misses some";
  for (size_t i = 0; i < Routes().size(); ++i) {
    const auto& r = Routes()[i];
    std::vector<std::string> query;
    for (std::string_view p : http::QueryParams(r)) query.push_back(fmt::format("`{}`", p));
    EXPECT_NE(doc.find(fmt::format("| {} | `{}` | {} |", r.method, r.pattern, fmt::join(query, ", "))),
              std::string::npos)
        << RouteName(i) << " is not in docs/http-api.md's table of routes with its query parameters";
    std::string path(r.pattern);
    for (auto [from, to] : {std::pair{"{q}", "docs.q"}, std::pair{"{id}", "01JDQ8Z3K6T6V3W1C9X2N4M5PQ"}}) {
      if (auto p = path.find(from); p != std::string::npos) path.replace(p, std::string_view(from).size(), to);
    }
    const RouteMatch match = MatchRoute(r.method, Target::Parse(path).segments);
    EXPECT_EQ(match.route, i) << RouteName(i) << " is answered by " << RouteName(match.route);
  }
}

// W3C Trace Context (docs/http-api.md, "Trace context"): a job's traceparent and tracestate as
// fields or headers, the request's headers for jobs that carry none, shown top-level.
class TraceApiTest : public ApiTest {
 protected:
  http::HttpResponse Enqueue(const std::string& body, const std::string& traceparent, const std::string& tracestate) {
    std::promise<http::HttpResponse> p;
    auto f = p.get_future();
    http::HttpRequest request{"POST", "/v1/queues/traced/jobs", "", body, "application/json"};
    request.traceparent = traceparent;
    request.tracestate = tracestate;
    api_.Handle(std::move(request), [&p](http::HttpResponse r) { p.set_value(std::move(r)); });
    return f.get();
  }
  json Job(const std::string& id) { return J(Call("GET", "/v1/queues/traced/jobs/" + id)); }
  http::HttpResponse PutSchedule(const std::string& name, const std::string& body, const std::string& traceparent) {
    std::promise<http::HttpResponse> p;
    auto f = p.get_future();
    http::HttpRequest request{"PUT", "/v1/queues/traced/schedules/" + name, "", body, "application/json"};
    request.traceparent = traceparent;
    api_.Handle(std::move(request), [&p](http::HttpResponse r) { p.set_value(std::move(r)); });
    return f.get();
  }
  json RunOf(const json& schedule) {
    const std::string key =
        fmt::format("schedule:{}:{}", schedule["name"].get<std::string>(), schedule["next_runs"][0].get<int64_t>());
    return J(Call("GET", "/v1/queues/traced/jobs?key=" + key));
  }
};

const std::string kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const std::string kRequestParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

TEST_F(TraceApiTest, AJobsOwnContextOrTheRequestsIsKeptAndShown) {
  auto r = Enqueue(R"({"jobs": [{"payload": 1, "traceparent": ")" + kParent + R"(", "tracestate": "a=1"},
                                {"payload": 2},
                                {"payload": 3, "headers": {"traceparent": ")" +
                       kParent + R"("}},
                                {"payload": 4, "traceparent": null}]})",
                   kRequestParent, "vendor=x, other=y");
  ASSERT_EQ(r.status, 201) << r.body;
  const json ids = J(r)["jobs"];
  json own = Job(ids[0]["id"]);
  EXPECT_EQ(own["traceparent"], kParent);
  EXPECT_EQ(own["tracestate"], "a=1");
  EXPECT_EQ(own["headers"]["traceparent"], kParent) << "kept in the headers, as OpenTelemetry carries it";
  json from_request = Job(ids[1]["id"]);
  EXPECT_EQ(from_request["traceparent"], kRequestParent);
  EXPECT_EQ(from_request["tracestate"], "vendor=x, other=y");
  json as_header = Job(ids[2]["id"]);
  EXPECT_EQ(as_header["traceparent"], kParent);
  EXPECT_TRUE(as_header["tracestate"].is_null()) << "the request's tracestate belongs to the request's traceparent";
  EXPECT_EQ(Job(ids[3]["id"])["traceparent"], kRequestParent);

  // A reserve answer shows it; a delivery without one has no such fields.
  ASSERT_EQ(Enqueue(R"({"payload": "plain"})", "", "").status, 201);
  auto got = J(Call("POST", "/v1/queues/traced/reserve", R"({"max": 10})"))["jobs"];
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0]["traceparent"], kParent);
  EXPECT_EQ(got[0]["tracestate"], "a=1");
  EXPECT_FALSE(got[4].contains("traceparent")) << got[4].dump();
}

// A schedule's template takes the fields; the PUT request's own headers are not applied to it
// (docs/http-api.md): a schedule's runs are not part of the request that made it.
TEST_F(TraceApiTest, AScheduleTemplateTakesTheFieldsNotThePutRequestsHeaders) {
  auto r = PutSchedule("traced",
                       R"({"every": "1h", "payload": 1, "traceparent": ")" + kParent + R"(", "tracestate": "a=1"})",
                       kRequestParent);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(J(r)["headers"]["traceparent"], kParent) << r.body;
  json run = RunOf(J(r));
  EXPECT_EQ(run["traceparent"], kParent) << run.dump();
  EXPECT_EQ(run["tracestate"], "a=1");
  r = PutSchedule("plain", R"({"every": "1h", "payload": 1})", kRequestParent);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(RunOf(J(r))["traceparent"].is_null()) << "the request's header is not the template's";
  ExpectError(PutSchedule("bad", R"({"every": "1h", "traceparent": "00-abc-def-01"})", ""), 400, "invalid_argument",
              "traceparent is \"00-abc-def-01\"");
  EXPECT_EQ(Call("GET", "/v1/queues/traced/schedules/bad").status, 404);
}

TEST_F(TraceApiTest, AMalformedContextInTheBodyIsRefusedAndInTheRequestsHeadersPassedOver) {
  ExpectError(Enqueue(R"({"payload": 1, "traceparent": "00-abc-def-01"})", "", ""), 400, "invalid_argument",
              "traceparent is \"00-abc-def-01\"; a W3C traceparent is 00-");
  ExpectError(Enqueue(R"({"payload": 1, "traceparent": 7})", "", ""), 400, "invalid_argument", "traceparent");
  ExpectError(Enqueue(R"({"payload": 1, "traceparent": ")" + kParent + R"(", "headers": {"traceparent": ")" +
                          kRequestParent + R"("}})",
                      "", ""),
              400, "invalid_argument", "traceparent and headers.traceparent are both given, and differ");
  ExpectError(Enqueue(R"({"jobs": [{"payload": 1}, {"payload": 1, "tracestate": "a=1"}]})", kRequestParent, ""), 400,
              "invalid_argument", "jobs[1].tracestate is given without a traceparent");
  EXPECT_EQ(Call("GET", "/v1/queues/traced").status, 404) << "refused before the queue was made";
  // A proxy's malformed header does not make an enqueue fail (W3C: a receiver passes it over).
  auto r = Enqueue(R"({"payload": 1})", "not-a-traceparent", "a=1");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(Job(J(r)["id"])["traceparent"].is_null());
  // Nor does a job's lack of room for it: 64 headers, or headers near 16 KiB (a hostile try found
  // both refused as "headers has 65 entries" once an agent added the header).
  std::string full = R"({"jobs": [{"payload": 1, "headers": {)";
  for (int i = 0; i < 64; ++i) full += (i ? ", " : "") + fmt::format(R"("h{}": "v")", i);
  full += R"(}}, {"payload": 2, "headers": {"big": ")" + std::string(16'370, 'x') + R"("}}]})";
  r = Enqueue(full, kRequestParent, "a=1");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_TRUE(Job(J(r)["jobs"][0]["id"])["traceparent"].is_null());
  EXPECT_TRUE(Job(J(r)["jobs"][1]["id"])["traceparent"].is_null());
  r = Enqueue(R"({"payload": 1, "headers": {"big": ")" + std::string(16'300, 'x') + R"("}})", kRequestParent,
              std::string(300, 'a') + "=1");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Job(J(r)["id"])["traceparent"], kRequestParent) << "room for the traceparent";
  EXPECT_TRUE(Job(J(r)["id"])["tracestate"].is_null()) << "not for the tracestate";
  r = Enqueue(R"({"payload": 1})", kRequestParent, "Bad State");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Job(J(r)["id"])["traceparent"], kRequestParent);
  EXPECT_TRUE(Job(J(r)["id"])["tracestate"].is_null()) << "a tracestate W3C would not read is dropped alone";
}

}  // namespace
}  // namespace delayq::testing
