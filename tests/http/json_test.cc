// The wire codec: what the server writes, the client reads back unchanged.
#include <gtest/gtest.h>

#include "http/json.h"
#include "http/json_responses.h"

namespace delayq::http {
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
}

TEST(JsonCodec, ScalarPayloadsStayVerbatim) {
  for (std::string p : {"42", "-1.50e3", "\"text with \\\"quotes\\\"\"", "true", "null", "[]", "{}"}) {
    auto body = ParseEnqueue("{\"payload\": " + p + " , \"delay_ms\": 1}");
    ASSERT_TRUE(body.ok()) << p << ": " << body.status().ToString();
    EXPECT_EQ(body->jobs[0].payload, p);
  }
}

}  // namespace
}  // namespace delayq::http
