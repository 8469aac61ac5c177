// The wire format, family by family: what one side writes, the other reads back unchanged (the
// client's requests through the server's parsers, the server's answers through the client's).
#include <gtest/gtest.h>

#include <functional>

#include "core/receipt.h"
#include "wire/enqueue.h"
#include "wire/error.h"
#include "wire/job.h"
#include "wire/json_read.h"
#include "wire/json_writer.h"
#include "wire/queue.h"
#include "wire/receipts.h"
#include "wire/reserve.h"
#include "wire/when.h"

namespace delayq::wire {
namespace {

TEST(JsonWriter, EscapesAndRepairsStrings) {
  JsonWriter w;
  w.BeginObject().Key("a\"b").String("line\nbreak\t\x01 \xc3\xa9 \xff end").Key("n").Int(-5);
  w.Key("arr").BeginArray().Bool(true).Null().Double(1.5).EndArray().EndObject();
  EXPECT_EQ(w.str(),
            "{\"a\\\"b\":\"line\\nbreak\\t\\u0001 \xc3\xa9 \xef\xbf\xbd end\",\"n\":-5,"
            "\"arr\":[true,null,1.5]}");
  EXPECT_TRUE(IsJsonValue(w.str()));
}

TEST(Base64, RoundTrips) {
  for (std::string s : {std::string(""), std::string("a"), std::string("ab"), std::string("abc"),
                        std::string("\x00\xff\x10", 3), std::string(1000, '\x7f')}) {
    EXPECT_EQ(*Base64Decode(Base64Encode(s)), s);
  }
  EXPECT_EQ(Base64Encode("hello"), "aGVsbG8=");
  EXPECT_EQ(*Base64Decode("aGVsbG8"), "hello");
  EXPECT_FALSE(Base64Decode("a"));
  EXPECT_FALSE(Base64Decode("a$==").has_value());
}

TEST(JsonCodec, JobsAndDeliveriesRoundTrip) {
  Job j;
  j.id = "01JDQ8Z3K6T6V3W1C9X2N4M5PQ";
  j.queue = "q";
  j.state = JobState::kDead;
  j.due_at_ms = 5;
  j.attempt = 2;
  j.max_attempts = 3;
  j.key = "k\"ey";
  j.payload = R"({"a": [1, 2.50]})";
  j.headers = {{"v", "1"}};
  j.created_at_ms = 4;
  j.last_error = "boom";
  j.dead_at_ms = 9;
  JsonWriter w;
  WriteJob(w, j);
  auto back = ParseJobResponse(w.str());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->payload, j.payload);
  EXPECT_EQ(back->key, j.key);
  EXPECT_EQ(back->state, JobState::kDead);
  EXPECT_EQ(back->headers, j.headers);
  EXPECT_EQ(back->dead_at_ms, 9);
  j.binary = true;
  j.payload = std::string("\x00\x01", 2);
  JsonWriter w2;
  WriteJob(w2, j);
  back = ParseJobResponse(w2.str());
  EXPECT_EQ(back->payload, j.payload);
  EXPECT_TRUE(back->binary);
}

TEST(JsonCodec, ErrorsBecomeStatuses) {
  Status s = ParseErrorResponse(409, ErrorBody(Code::kLeaseExpired, "stale"));
  EXPECT_EQ(s.code(), Code::kLeaseExpired);
  EXPECT_EQ(s.message(), "stale");
  EXPECT_EQ(ParseErrorResponse(405, R"({"error":{"code":"method_not_allowed","message":"x"}})").code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ParseErrorResponse(503, "<html>").code(), Code::kUnavailable);
  // A proxy's 502 and 504 (delayq down or restarting behind it) are unavailable: a caller tries
  // again. They were internal errors, and a worker's ack was not sent again.
  EXPECT_EQ(ParseErrorResponse(502, "<html><title>502 Bad Gateway</title></html>").code(), Code::kUnavailable);
  EXPECT_EQ(ParseErrorResponse(504, R"({"error":{"code":"gateway_timeout","message":"x"}})").code(),
            Code::kUnavailable);
  EXPECT_EQ(ParseErrorResponse(500, "<html>").code(), Code::kInternal);
}

TEST(JsonCodec, ScalarPayloadsStayVerbatim) {
  for (std::string p : {"42", "-1.50e3", "\"text with \\\"quotes\\\"\"", "true", "null", "[]", "{}"}) {
    auto body = ParseEnqueueRequest("{\"payload\": " + p + " , \"delay_ms\": 1}");
    ASSERT_TRUE(body.ok()) << p << ": " << body.status().ToString();
    EXPECT_EQ(body->jobs[0].payload, p);
  }
}

TEST(WireEnqueue, RequestsAndAnswersRoundTrip) {
  EnqueueRequest a{.payload = R"({"orderId":42})",
                   .headers = {{"v", "2"}},
                   .when = {.delay_ms = 1500},
                   .key = "order-42",
                   .replace = true,
                   .max_attempts = 7};
  EnqueueRequest b{.payload = std::string("\x00\xff", 2), .binary = true, .when = {.deliver_at_ms = 1767225600000}};
  auto one = ParseEnqueueRequest(WriteEnqueueRequest(a));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_FALSE(one->batch);
  const EnqueueRequest& got = one->jobs[0];
  EXPECT_EQ(got.payload, a.payload);
  EXPECT_EQ(got.headers, a.headers);
  EXPECT_EQ(got.when.delay_ms, a.when.delay_ms);
  EXPECT_EQ(got.key, a.key);
  EXPECT_TRUE(got.replace);
  EXPECT_EQ(got.max_attempts, 7);
  const EnqueueRequest both[] = {a, b};
  auto batch = ParseEnqueueRequest(WriteEnqueueBatchRequest(both));
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_TRUE(batch->batch);
  ASSERT_EQ(batch->jobs.size(), 2u);
  EXPECT_EQ(batch->jobs[1].payload, b.payload);
  EXPECT_TRUE(batch->jobs[1].binary);
  EXPECT_EQ(batch->jobs[1].when.deliver_at_ms, b.when.deliver_at_ms);

  const EnqueueResult r{.id = "01JDQ8Z3K6T6V3W1C9X2N4M5PQ", .due_at_ms = 9, .duplicate = true, .replaced = true};
  auto back = ParseEnqueueResponse(WriteEnqueueResponse(r));
  ASSERT_TRUE(back.ok() && back->size() == 1u);
  EXPECT_EQ((*back)[0].id, r.id);
  EXPECT_EQ((*back)[0].due_at_ms, 9);
  EXPECT_TRUE((*back)[0].duplicate && (*back)[0].replaced);
  const EnqueueResult rs[] = {r, EnqueueResult{.id = "x", .due_at_ms = 1}};
  back = ParseEnqueueResponse(WriteEnqueueBatchResponse(rs));
  ASSERT_TRUE(back.ok() && back->size() == 2u);
  EXPECT_FALSE((*back)[1].duplicate);
}

TEST(WireWhen, RescheduleRoundTripsAndNeedsADueTime) {
  auto w = ParseRescheduleRequest(WriteRescheduleRequest({.delay_ms = 30}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->delay_ms, 30);
  w = ParseRescheduleRequest(WriteRescheduleRequest({.deliver_at_ms = 1767225600000}));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->deliver_at_ms, 1767225600000);
  EXPECT_EQ(ParseRescheduleRequest(WriteRescheduleRequest({})).code(), Code::kInvalidArgument);
  EXPECT_EQ(ParseRescheduleRequest(R"({"delay":"1h30m"})")->delay_ms, 5'400'000);
}

TEST(WireReserve, RequestsAndDeliveriesRoundTrip) {
  const ReserveRequest r{.max = 10, .wait_ms = 20'000, .lease_ms = 60'000, .max_bytes = 1 << 20};
  auto back = ParseReserveRequest(WriteReserveRequest(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->max, 10);
  EXPECT_EQ(back->wait_ms, 20'000);
  EXPECT_EQ(back->lease_ms, 60'000);
  EXPECT_EQ(back->max_bytes, 1 << 20);
  EXPECT_EQ(ParseReserveRequest("")->max, 1) << "an empty body is all defaults";
  const Delivery d{.id = "01JDQ8Z3K6T6V3W1C9X2N4M5PQ",
                   .receipt = "r.1.2",
                   .payload = "[1,2]",
                   .headers = {{"a", "b"}},
                   .attempt = 2,
                   .max_attempts = 5,
                   .due_at_ms = 7,
                   .key = "k",
                   .lease_deadline_ms = 8};
  auto got = ParseReserveResponse(WriteReserveResponse(std::span(&d, 1)));
  ASSERT_TRUE(got.ok() && got->size() == 1u);
  const Delivery& g = (*got)[0];
  EXPECT_EQ(g.id, d.id);
  EXPECT_EQ(g.receipt, d.receipt);
  EXPECT_EQ(g.payload, d.payload);
  EXPECT_EQ(g.headers, d.headers);
  EXPECT_EQ(g.attempt, 2);
  EXPECT_EQ(g.max_attempts, 5);
  EXPECT_EQ(g.due_at_ms, 7);
  EXPECT_EQ(g.key, "k");
  EXPECT_EQ(g.lease_deadline_ms, 8);
}

TEST(WireReceipts, RequestsAndAnswersRoundTrip) {
  const std::vector<std::string> receipts = {"a.1.2", "b.3.4", "a.1.2"};
  auto ack = ParseReceiptsRequest(WriteAckRequest(receipts, true), ReceiptsFor::kAck);
  ASSERT_TRUE(ack.ok());
  EXPECT_TRUE(ack->batch);
  EXPECT_EQ(ack->receipts, receipts);
  auto one = ParseReceiptsRequest(WriteAckRequest(std::span(receipts.data(), 1), false), ReceiptsFor::kAck);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->batch);
  auto nack = ParseReceiptsRequest(WriteNackRequest({.receipt = "a.1.2", .retry_in_ms = 5, .error = "e", .dead = true}),
                                   ReceiptsFor::kNack);
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(nack->retry_in_ms, 5);
  EXPECT_EQ(nack->error, "e");
  EXPECT_TRUE(nack->dead);
  auto touch = ParseReceiptsRequest(WriteTouchRequest({"a.1.2", 60'000, R"({"done": [1, 2]})"}), ReceiptsFor::kTouch);
  ASSERT_TRUE(touch.ok());
  EXPECT_EQ(touch->lease_ms, 60'000);
  EXPECT_EQ(touch->progress, R"({"done": [1, 2]})") << "kept as written";
  auto plain = ParseReceiptsRequest(WriteTouchRequest({"a.1.2", {}, {}}), ReceiptsFor::kTouch);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->progress);
  auto null = ParseReceiptsRequest(R"({"receipt": "a.1.2", "progress": null})", ReceiptsFor::kTouch);
  ASSERT_TRUE(null.ok());
  EXPECT_FALSE(null->progress) << "null is none";

  auto n = ParseNackResponse(WriteNackResponse({.state = JobState::kDead, .due_at_ms = 11}));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->state, JobState::kDead);
  EXPECT_EQ(n->due_at_ms, 11) << "a dead job's due time is answered too";
  EXPECT_EQ(ParseTouchResponse(WriteTouchResponse({.lease_deadline_ms = 12}))->lease_deadline_ms, 12);
  const std::vector<Status> statuses = {Status::Ok(), Status::LeaseExpired("stale"), Status::Ok()};
  auto batch =
      ParseBatchResponse(WriteBatchResponse("acked", receipts, statuses, FirstOccurrences(receipts)), receipts);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_TRUE((*batch)[0].ok());
  EXPECT_EQ((*batch)[1].code(), Code::kLeaseExpired);
  EXPECT_EQ((*batch)[1].message(), "stale");
  EXPECT_TRUE((*batch)[2].ok());
}

TEST(WireQueue, StatsConfigScheduleAndCountsRoundTrip) {
  QueueStats s;
  s.name = "q";
  s.scheduled = 1;
  s.ready = 2;
  s.reserved = 3;
  s.dead = 4;
  s.due_next_60s = 5;
  s.earliest_due_at_ms = 6;
  s.oldest_ready_ms = 7;
  s.paused = true;
  s.counters = {8, 9, 10, 11, 12, 13};
  s.lateness.count = 14;
  s.lateness.p99_ms = 1.5;
  auto back = ParseStatsResponse(WriteStatsResponse(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->name, "q");
  EXPECT_EQ(back->dead, 4);
  EXPECT_EQ(back->earliest_due_at_ms, 6);
  EXPECT_TRUE(back->paused);
  EXPECT_EQ(back->counters.dead, 13u);
  EXPECT_EQ(back->lateness.count, 14u);
  EXPECT_EQ(back->lateness.p99_ms, 1.5);
  auto list = ParseQueuesResponse(WriteQueuesResponse(std::span(&s, 1)));
  ASSERT_TRUE(list.ok() && list->size() == 1u);

  QueueConfig c;
  c.max_attempts = 3;
  c.backoff = {.base_ms = 10, .factor = 1.5, .max_ms = 100, .jitter = 0.25};
  c.dead_retention_ms = 1'000;
  auto config = ParseConfig(WriteConfigBody(c), QueueConfig{});
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(*config, c);
  EXPECT_EQ(ParseConfig(R"({"lease_ms": 5000})", c)->max_attempts, 3) << "fields not given keep the base's";

  const ScheduleHistogram h{.start_ms = 60'000, .bucket_ms = 60'000, .buckets = {1, 0, 2}, .later = 3};
  auto hb = ParseScheduleResponse(WriteScheduleResponse(h));
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->buckets, h.buckets);
  EXPECT_EQ(hb->later, 3);
  const std::vector<std::string> ids = {"a", "b"};
  EXPECT_EQ(*ParseReplayRequest(WriteReplayRequest(ids)), ids);
  EXPECT_TRUE(ParseReplayRequest("")->empty());
  EXPECT_EQ(*ParseCountResponse(WriteCountResponse("purged", 42), "purged"), 42);
}

// Request objects are closed (docs/security.md): a field the route does not know is refused, naming it
// and the nearest known one, so a typo never silently changes what a request means.
TEST(WireClosedObjects, AnUnknownFieldIsRefusedNamingTheNearestKnownOne) {
  struct Case {
    std::string body;
    std::function<Status(std::string_view)> parse;
    std::string message;
  };
  auto enqueue = [](std::string_view b) { return ParseEnqueueRequest(b).status(); };
  auto reserve = [](std::string_view b) { return ParseReserveRequest(b).status(); };
  auto ack = [](std::string_view b) { return ParseReceiptsRequest(b, ReceiptsFor::kAck).status(); };
  auto nack = [](std::string_view b) { return ParseReceiptsRequest(b, ReceiptsFor::kNack).status(); };
  auto touch = [](std::string_view b) { return ParseReceiptsRequest(b, ReceiptsFor::kTouch).status(); };
  auto config = [](std::string_view b) { return ParseConfig(b, QueueConfig{}).status(); };
  auto reschedule = [](std::string_view b) { return ParseRescheduleRequest(b).status(); };
  auto replay = [](std::string_view b) { return ParseReplayRequest(b).status(); };
  const std::vector<Case> cases = {
      {R"({"payload": 1, "dealy_ms": 5000})", enqueue, R"(unknown field "dealy_ms" (did you mean "delay_ms"?))"},
      {R"({"payload": 1, "Key": "k"})", enqueue, R"(unknown field "Key" (did you mean "key"?))"},
      {R"({"jobs": [{"payload": 1}, {"payload": 2, "max_attempt": 3}]})", enqueue,
       R"(unknown field "jobs[1].max_attempt" (did you mean "max_attempts"?))"},
      {R"({"jobs": [{"payload": 1}], "delay_ms": 5})", enqueue, R"(unknown field "delay_ms"; the fields are jobs)"},
      {R"({"payload": 1, "zzzzzzzzzz": 1})", enqueue, "the fields are payload, payload_base64, delay_ms"},
      {R"({"max": 1, "wait": 100})", reserve, R"(unknown field "wait" (did you mean "wait_ms"?))"},
      {R"({"max": 1, "wait_sm": 100})", reserve, R"(unknown field "wait_sm" (did you mean "wait_ms"?))"},
      {R"({"receipt": "r", "retry_in_ms": 5})", ack,
       R"(unknown field "retry_in_ms"; the fields are receipt, receipts)"},
      {R"({"receipt": "r", "lease_ms": 5})", nack, R"(unknown field "lease_ms")"},
      {R"({"receipt": "r", "retry_in": 5})", nack, R"(did you mean "retry_in_ms"?)"},
      {R"({"receipt": "r", "lease": 5})", touch, R"(did you mean "lease_ms"?)"},
      {R"({"receipt": "r", "progres": 5})", touch, R"(did you mean "progress"?)"},
      {R"({"receipt": "r", "progress": 5})", ack, R"(unknown field "progress")"},
      {R"({"lease_ms": 5000, "max_atempts": 3})", config, R"(did you mean "max_attempts"?)"},
      {R"({"backoff": {"base": 10}})", config, R"(unknown field "backoff.base" (did you mean "base_ms"?))"},
      {R"({"delay": "5s", "when": 1})", reschedule, R"(unknown field "when")"},
      {R"({"id": ["x"]})", replay, R"(unknown field "id" (did you mean "ids"?))"},
  };
  for (const auto& c : cases) {
    const Status st = c.parse(c.body);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << c.body;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << c.body << " answered: " << st.message();
  }
  // What the writers write is always read back: the closed readers know every field they send.
  EXPECT_TRUE(ParseConfig(WriteConfigBody(QueueConfig{}), QueueConfig{}).ok());
  EXPECT_TRUE(ParseReserveRequest(WriteReserveRequest({.max = 3, .wait_ms = 5, .lease_ms = 5000})).ok());
  // A server's answer is read openly: a newer server may add fields.
  EXPECT_TRUE(ParseConfig(R"({"lease_ms": 5000, "from_a_newer_server": 1})", QueueConfig{}, Fields::kOpen).ok());
}

// An ack's results: beside a single receipt, or in a batch entry {"receipt", "result"} mixed with
// plain receipts; kept as written; null is none; refused for the whole request when one is not
// JSON or is too large, naming which; never on a release, nor beside "receipts".
TEST(WireAck, ResultsAreReadPerReceiptAndCheckedForTheWholeRequest) {
  const std::vector<AckRequest> requests = {{"a.1.2", std::nullopt}, {"b.1.2", R"({"ok": true})"}, {"c.1.2", "7"}};
  auto batch = ParseReceiptsRequest(WriteAckRequest(std::span(requests), true), ReceiptsFor::kAck);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->receipts, (std::vector<std::string>{"a.1.2", "b.1.2", "c.1.2"}));
  ASSERT_EQ(batch->results.size(), 3u);
  EXPECT_FALSE(batch->results[0]);
  EXPECT_EQ(batch->results[1], R"({"ok": true})") << "kept as written";
  EXPECT_EQ(batch->results[2], "7");
  auto one = ParseReceiptsRequest(WriteAckRequest(std::span(requests).subspan(1, 1), false), ReceiptsFor::kAck);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->batch);
  ASSERT_EQ(one->results.size(), 1u);
  EXPECT_EQ(one->results[0], R"({"ok": true})");
  auto plain = ParseReceiptsRequest(R"({"receipts": ["a", {"receipt": "b", "result": null}]})", ReceiptsFor::kAck);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->receipts, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(plain->results.empty()) << "no result at all: a plain batch";

  struct Case {
    std::string body;
    ReceiptsFor route;
    std::string message;
  };
  const std::string big = std::string("\"") + std::string(Limits::kMaxResult, 'x') + "\"";
  const std::vector<Case> cases = {
      {R"({"receipts": ["a"], "result": 1})", ReceiptsFor::kAck, "result is given beside receipts"},
      {R"({"receipts": ["a", {"result": 1}]})", ReceiptsFor::kAck, "receipts[1].receipt is missing"},
      {R"({"receipts": ["a", {"receipt": "b", "reslt": 1}]})", ReceiptsFor::kAck,
       R"(unknown field "receipts[1].reslt" (did you mean "result"?))"},
      {R"({"receipts": ["a", 5]})", ReceiptsFor::kAck, "receipts[1]"},
      {R"({"receipts": [{"receipt": 5}]})", ReceiptsFor::kAck, "receipts[0].receipt"},
      {R"({"receipt": "a", "result": )" + big + "}", ReceiptsFor::kAck, "result is 65538 bytes of JSON; at most 65536"},
      {R"({"receipts": ["a", {"receipt": "b", "result": )" + big + "}]}", ReceiptsFor::kAck,
       "receipts[1].result is 65538 bytes"},
      {R"({"receipt": "a", "result": 1})", ReceiptsFor::kRelease, R"(unknown field "result")"},
      {R"({"receipts": [{"receipt": "a"}]})", ReceiptsFor::kRelease, "receipts[0]"},
  };
  for (const auto& c : cases) {
    auto r = ParseReceiptsRequest(c.body, c.route);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.body.substr(0, 80);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.body.substr(0, 80) << " answered: " << r.status().message();
    EXPECT_LT(r.status().message().size(), 400u) << "the value is not echoed";
  }
  // Exactly at the limit: accepted.
  const std::string edge = std::string("\"") + std::string(Limits::kMaxResult - 2, 'x') + "\"";
  EXPECT_TRUE(ParseReceiptsRequest(R"({"receipt": "a", "result": )" + edge + "}", ReceiptsFor::kAck).ok());
}

// A field named twice in any of a request's own objects is refused, naming where; a large object
// (past the scan of a few keys) and a late job of a batch alike. Payloads keep their duplicates.
TEST(WireClosedObjects, AFieldGivenTwiceIsRefusedNamingWhere) {
  std::string headers;
  for (int i = 0; i < 40; ++i) headers += fmt::format(R"("h{}":"v",)", i);
  const std::string big = R"({"payload":1,"headers":{)" + headers + R"("h7":"again"}})";
  Status s = ParseEnqueueRequest(big).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find(R"(the field "headers.h7" is given twice)"), std::string::npos) << s.ToString();
  std::string jobs;
  for (int i = 0; i < 999; ++i) jobs += R"({"payload":{"a":1,"a":2}},)";
  s = ParseEnqueueRequest(R"({"jobs":[)" + jobs + R"({"payload":1,"key":"k","key":"k"}]})").status();
  EXPECT_NE(s.message().find(R"(the field "jobs[999].key" is given twice)"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ParseEnqueueRequest(R"({"jobs":[)" + jobs + R"({"payload":1}]})").ok()) << "payloads keep theirs";
  s = ParseReceiptsRequest(R"({"receipts":["a"],"receipts":["b"]})", ReceiptsFor::kAck).status();
  EXPECT_NE(s.message().find(R"(the field "receipts" is given twice)"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace delayq::wire
