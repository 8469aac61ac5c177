// The conformance suite, progress on touch (SPEC §11.3) on every store: a touch may report how far
// its consumer has got; the job shows the last one while that delivery holds it (by id, by key,
// in listings, over a restart), and no longer once the delivery ends (nack, dead, ack) or another
// delivery holds the job. A progress that is not JSON, or too large, is refused before the touch
// changes anything.
#include <gtest/gtest.h>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

Status TouchWith(Queue& q, const std::string& queue, const std::string& receipt, std::optional<std::string> progress,
                 std::optional<int64_t> lease_ms = std::nullopt) {
  return q.Touch(queue, TouchRequest{receipt, lease_ms, std::move(progress)}).status();
}

std::string ProgressOf(Queue& q, const std::string& queue, const JobRef& ref) {
  auto job = q.Get(queue, ref);
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? job->progress : "(no job)";
}

}  // namespace

TEST_P(QueueConformance, ProgressIsShownWhileItsDeliveryHoldsTheJob) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("work");
  r.key = "report-9";
  const EnqueueResult made = MustEnqueue(q(), queue, r);
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  const std::string first = got[0].receipt;
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), "") << "no touch reported any";

  ASSERT_TRUE(TouchWith(q(), queue, first, R"({"done": 3, "of": 10})").ok());
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), R"({"done": 3, "of": 10})") << "kept as written";
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ByKey("report-9")), R"({"done": 3, "of": 10})");
  auto listed = q().ListJobs(queue, ListRequest{JobState::kReserved, 10, {}});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->jobs.size(), 1u);
  EXPECT_EQ(listed->jobs[0].progress, R"({"done": 3, "of": 10})");

  ASSERT_TRUE(TouchWith(q(), queue, first, std::nullopt, 60'000).ok());
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), R"({"done": 3, "of": 10})")
      << "a touch without one keeps it";
  ASSERT_TRUE(TouchWith(q(), queue, first, "0.5").ok());
  h_->Restart();
  auto after = q().Get(queue, JobRef::ById(made.id));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kReserved);
  EXPECT_EQ(after->progress, "0.5") << "the last one, kept over a restart";

  // The delivery ends: the job shows none, and its next delivery starts with none.
  ASSERT_TRUE(q().Nack(queue, NackRequest{first, 0, "again", false}).ok());
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), "");
  got = ReserveEventually(*h_, queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), "") << "a new delivery has reported none";
  EXPECT_EQ(TouchWith(q(), queue, first, R"("stale")").code(), Code::kLeaseExpired);
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), "") << "a stale receipt's progress is not kept";
  ASSERT_TRUE(TouchWith(q(), queue, got[0].receipt, R"(["second", 1])").ok());
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), R"(["second", 1])");

  // Dead, it shows none; acked, it is gone (and so is its progress).
  ASSERT_TRUE(q().Nack(queue, NackRequest{got[0].receipt, std::nullopt, "boom", true}).ok());
  auto dead = q().Get(queue, JobRef::ById(made.id));
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->state, JobState::kDead);
  EXPECT_EQ(dead->progress, "");
  auto replayed = q().ReplayDead(queue, std::vector<std::string>{made.id});
  ASSERT_TRUE(replayed.ok());
  ASSERT_EQ(*replayed, 1);
  got = ReserveEventually(*h_, queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), "") << "a replayed job starts with none";
  ASSERT_TRUE(TouchWith(q(), queue, got[0].receipt, "1").ok());
  ASSERT_TRUE(q().Ack(queue, got[0].receipt).ok());
  EXPECT_EQ(q().Get(queue, JobRef::ById(made.id)).status().code(), Code::kNotFound);
}

TEST_P(QueueConformance, ABadProgressIsRefusedBeforeTheTouchChangesAnything) {
  const std::string queue = QueueName();
  const EnqueueResult made = MustEnqueue(q(), queue, Job("work"));
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  const std::string receipt = got[0].receipt;
  ASSERT_TRUE(TouchWith(q(), queue, receipt, R"({"step": "kept"})").ok());
  const int64_t deadline = q().Get(queue, JobRef::ById(made.id))->lease_deadline_ms;

  auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "not a JSON value"},
      {"{", "not a JSON value"},
      {"step 3", "not a JSON value"},
      {"1 2", "not a JSON value"},
      {"\"\xff\xfe\"", "not a JSON value"},
      {nested(200), "not a JSON value"},
      {nested(64), "nested at most 63 levels"},  // in a request body it would be 65 deep
      {"\"" + std::string(4095, 'x') + "\"", "4097 bytes of JSON; at most 4096"},
      {"\"" + std::string(1 << 20, 'x') + "\"", "at most 4096"},
  };
  for (const auto& [progress, said] : bad) {
    const Status s = TouchWith(q(), queue, receipt, progress, Limits::kMaxLeaseMs);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << progress.substr(0, 40);
    EXPECT_NE(s.message().find(said), std::string::npos) << s.ToString().substr(0, 200);
    EXPECT_LT(s.message().size(), 300u) << "a huge value is not echoed";
  }
  auto job = q().Get(queue, JobRef::ById(made.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->progress, R"({"step": "kept"})") << "nothing changed";
  EXPECT_EQ(job->lease_deadline_ms, deadline) << "not even the lease";

  const std::string largest = "\"" + std::string(Limits::kMaxProgress - 2, 'y') + "\"";
  ASSERT_TRUE(TouchWith(q(), queue, receipt, largest).ok()) << "exactly the limit is fine";
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), largest);
  ASSERT_TRUE(TouchWith(q(), queue, receipt, nested(63)).ok());
  EXPECT_EQ(ProgressOf(q(), queue, JobRef::ById(made.id)), nested(63));
  EXPECT_EQ(TouchWith(q(), queue, "not-a-receipt", "1").code(), Code::kInvalidArgument);
}

}  // namespace delayq::testing
