#include "core/validate.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

TEST(Validate, QueueNames) {
  EXPECT_TRUE(ValidateQueueName("orders").ok());
  EXPECT_TRUE(ValidateQueueName("a.b_c:d-E9").ok());
  EXPECT_TRUE(ValidateQueueName(std::string(128, 'q')).ok());
  for (std::string bad : {std::string(""), std::string(129, 'q'), std::string("a b"), std::string("a/b"),
                          std::string("\xc3\xa9"), std::string("a\0b", 3)}) {
    Status s = ValidateQueueName(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("[A-Za-z0-9._:-]"), std::string::npos) << s.message();
  }
}

TEST(Validate, EnqueueNamesTheField) {
  QueueConfig c;
  EnqueueRequest r;
  r.payload = "x";
  EXPECT_TRUE(ValidateEnqueue(r, c).ok());
  r.payload.clear();
  Status s = ValidateEnqueue(r, c, "jobs[3].");
  EXPECT_NE(s.message().find("jobs[3].payload"), std::string::npos) << s.message();
  r.payload = "x";
  r.headers[""] = "v";
  EXPECT_NE(ValidateEnqueue(r, c).message().find("headers"), std::string::npos);
}

TEST(Validate, DueTimes) {
  QueueConfig c;
  const int64_t now = 1'000'000;
  EXPECT_EQ(*ResolveDue({}, now, c), now);
  EXPECT_EQ(*ResolveDue({5000, {}}, now, c), now + 5000);
  EXPECT_EQ(*ResolveDue({{}, now - 10}, now, c), now) << "the past means now";
  EXPECT_EQ(*ResolveDue({{}, now + 10}, now, c), now + 10);
  EXPECT_EQ(ResolveDue({-1, {}}, now, c).code(), Code::kInvalidArgument);
  EXPECT_EQ(ResolveDue({c.max_delay_ms + 1, {}}, now, c).code(), Code::kInvalidArgument);
  EXPECT_EQ(ResolveDue({{}, now + c.max_delay_ms + 1}, now, c).code(), Code::kInvalidArgument);
  EXPECT_EQ(ResolveDue({1, now}, now, c).code(), Code::kInvalidArgument);
  EXPECT_TRUE(ResolveDue({c.max_delay_ms, {}}, now, c).ok());
}

TEST(Validate, Config) {
  EXPECT_TRUE(ValidateConfig({}).ok());
  QueueConfig c;
  c.backoff.jitter = 1.5;
  EXPECT_NE(ValidateConfig(c).message().find("jitter"), std::string::npos);
  c = {};
  c.lease_ms = 10;
  EXPECT_NE(ValidateConfig(c).message().find("lease_ms"), std::string::npos);
  c = {};
  c.backoff.factor = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(ValidateConfig(c).ok());
}

}  // namespace
}  // namespace delayq
