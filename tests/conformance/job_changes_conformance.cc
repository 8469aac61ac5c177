// The Queue conformance suite (queue_conformance.h): a job changed after it was made: by key
// (duplicate, replace), cancel, reschedule.
#include "conformance/queue_conformance.h"

#include "conformance/helpers.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/errors.h"
#include "core/validate.h"

namespace delayq::testing {
namespace {

using ::testing::Test;

TEST_P(QueueConformance, DuplicateKeyReturnsTheLiveJob) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("first", 10 * h_->unit_ms());
  r.key = "k1";
  EnqueueResult a = MustEnqueue(q(), queue, r);
  r.payload = "second";
  EnqueueResult b = MustEnqueue(q(), queue, r);
  EXPECT_TRUE(b.duplicate);
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.due_at_ms, a.due_at_ms);
  auto job = q().Get(queue, JobRef::ById(a.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->payload, "first");
  EXPECT_EQ(MustStats(q(), queue).scheduled, 1);

  // Within one batch the first job with a key wins.
  EnqueueRequest x = Job("x");
  x.key = "k2";
  EnqueueRequest y = Job("y");
  y.key = "k2";
  auto res = q().EnqueueBatch(queue, std::vector<EnqueueRequest>{x, y});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_FALSE((*res)[0].duplicate);
  EXPECT_TRUE((*res)[1].duplicate);
  EXPECT_EQ((*res)[0].id, (*res)[1].id);

  // Once acked, the key is free again.
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, "k2");
  ASSERT_TRUE(q().Ack(queue, got[0].receipt).ok());
  EnqueueResult c = MustEnqueue(q(), queue, x);
  EXPECT_FALSE(c.duplicate);
  EXPECT_NE(c.id, (*res)[0].id);
}

// docs/http-api.md: in a batch the first entry with a key acts, with replace too; the later ones
// are duplicates that change nothing (a hostile try asked which one wins).
TEST_P(QueueConformance, InABatchTheFirstEntryWithAKeyActsEvenWithReplace) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("v0", 100 * h_->unit_ms());
  r.key = "k";
  const EnqueueResult made = MustEnqueue(q(), queue, r);
  EnqueueRequest v1 = r, v2 = r;
  v1.payload = "v1";
  v1.replace = true;
  v2.payload = "v2";
  v2.replace = true;
  auto res = q().EnqueueBatch(queue, std::vector<EnqueueRequest>{v1, v2});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->size(), 2u);
  EXPECT_TRUE((*res)[0].replaced);
  EXPECT_TRUE((*res)[1].duplicate);
  EXPECT_FALSE((*res)[1].replaced);
  EXPECT_EQ((*res)[1].id, made.id);
  auto job = q().Get(queue, JobRef::ByKey("k"));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->payload, "v1");
  EXPECT_EQ(MustStats(q(), queue).scheduled, 1);
}

TEST_P(QueueConformance, ReplaceByKeyRewritesPayloadHeadersAndDueTime) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("v1", 100 * h_->unit_ms());
  r.key = "order-7";
  r.headers = {{"v", "1"}};
  EnqueueResult a = MustEnqueue(q(), queue, r);
  r.payload = "v2";
  r.headers = {{"v", "2"}};
  r.when.delay_ms = 0;
  r.replace = true;
  EnqueueResult b = MustEnqueue(q(), queue, r);
  EXPECT_EQ(b.id, a.id);
  EXPECT_TRUE(b.duplicate);
  EXPECT_TRUE(b.replaced);
  EXPECT_LT(b.due_at_ms, a.due_at_ms);
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "v2");
  EXPECT_EQ(got[0].headers.at("v"), "2");
  // While reserved it cannot be replaced.
  r.payload = "v3";
  EXPECT_EQ(q().Enqueue(queue, r).code(), Code::kConflict);
  auto job = q().Get(queue, JobRef::ById(a.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->payload, "v2");
  // Replaced after a failed attempt, with fewer attempts allowed: its attempts start again, so
  // it is never delivered for "attempt 2 of 1". (Found by delayq-check.)
  ASSERT_TRUE(q().Nack(queue, {got[0].receipt, 0, "failed", false}).ok());
  r.payload = "v4";
  r.max_attempts = 1;
  EXPECT_TRUE(MustEnqueue(q(), queue, r).replaced);
  job = q().Get(queue, JobRef::ById(a.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->attempt, 0);
  EXPECT_EQ(job->max_attempts, 1);
  got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "v4");
  EXPECT_EQ(got[0].attempt, 1);
  EXPECT_EQ(got[0].max_attempts, 1);
  auto nack = q().Nack(queue, {got[0].receipt, 0, "failed again", false});
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(nack->state, JobState::kDead) << "its one attempt is used";
}

TEST_P(QueueConformance, CancelByIdAndByKey) {
  const std::string queue = QueueName();
  EnqueueResult a = MustEnqueue(q(), queue, Job("a", 10 * h_->unit_ms()));
  EnqueueRequest kr = Job("b", 10 * h_->unit_ms());
  kr.key = "cancel-me";
  EnqueueResult b = MustEnqueue(q(), queue, kr);
  EnqueueResult c = MustEnqueue(q(), queue, Job("c"));  // ready
  EnqueueResult d = MustEnqueue(q(), queue, Job("d"));

  EXPECT_TRUE(q().Cancel(queue, JobRef::ById(a.id)).ok());
  EXPECT_EQ(q().Get(queue, JobRef::ById(a.id)).code(), Code::kNotFound);
  EXPECT_EQ(q().Cancel(queue, JobRef::ById(a.id)).code(), Code::kNotFound);
  EXPECT_TRUE(q().Cancel(queue, JobRef::ByKey("cancel-me")).ok());
  EXPECT_EQ(q().Get(queue, JobRef::ById(b.id)).code(), Code::kNotFound);
  EXPECT_TRUE(q().Cancel(queue, JobRef::ById(c.id)).ok());

  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, d.id);
  EXPECT_EQ(q().Cancel(queue, JobRef::ById(d.id)).code(), Code::kConflict);
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.scheduled, 0);
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(s.reserved, 1);
  // The key is free again after the cancel.
  EXPECT_FALSE(MustEnqueue(q(), queue, kr).duplicate);
  h_->Advance(11 * h_->unit_ms());
  EXPECT_EQ(ReserveEventually(*h_, queue).size(), 1u);
}

TEST_P(QueueConformance, RescheduleMovesTheDueTime) {
  const std::string queue = QueueName();
  const int64_t u = h_->unit_ms();
  EnqueueResult a = MustEnqueue(q(), queue, Job("a", 100 * u));
  EnqueueRequest kr = Job("b", 2 * u);
  kr.key = "b";
  EnqueueResult b = MustEnqueue(q(), queue, kr);

  When sooner;
  sooner.delay_ms = u;
  auto moved = q().Reschedule(queue, JobRef::ById(a.id), sooner);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_LT(moved->due_at_ms, a.due_at_ms);
  When later;
  later.delay_ms = 200 * u;
  ASSERT_TRUE(q().Reschedule(queue, JobRef::ByKey("b"), later).ok());

  auto got = ReceiveAll(*h_, queue, 1, u / 2, 20);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, a.id);
  EXPECT_GE(h_->NowMs(), moved->due_at_ms);
  h_->Advance(5 * u);
  EXPECT_TRUE(MustReserve(q(), queue).empty()) << "b was rescheduled later";
  EXPECT_EQ(q().Reschedule(queue, JobRef::ById(a.id), sooner).code(), Code::kConflict);
  auto job = q().Get(queue, JobRef::ById(b.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kScheduled);
  When too_far;
  too_far.delay_ms = 400LL * 86'400'000;
  EXPECT_EQ(q().Reschedule(queue, JobRef::ById(b.id), too_far).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace delayq::testing
