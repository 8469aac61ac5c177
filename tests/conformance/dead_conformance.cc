// The Queue conformance suite (queue_conformance.h): retries and the dead-letter queue: back-off,
// death, retention, replay and purge.
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

TEST_P(QueueConformance, NackBacksOffExponentially) {
  const std::string queue = QueueName();
  QueueConfig config;
  config.backoff = {1000, 2.0, 3'600'000, 0.0};
  config.max_attempts = 10;
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  MustEnqueue(q(), queue, Job("retry me"));
  int64_t expected_delay = 1000;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto got = ReceiveAll(*h_, queue, 1, 250, 100);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].attempt, attempt);
    const int64_t before = h_->NowMs();
    auto nack = q().Nack(queue, {got[0].receipt, std::nullopt, "boom", false});
    ASSERT_TRUE(nack.ok()) << nack.status().ToString();
    EXPECT_EQ(nack->state, JobState::kScheduled);
    EXPECT_GE(nack->due_at_ms, before + expected_delay);
    EXPECT_LE(nack->due_at_ms, h_->NowMs() + expected_delay);
    auto job = q().Get(queue, JobRef::ById(got[0].id));
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->last_error, "boom");
    EXPECT_EQ(job->state, JobState::kScheduled);
    if (h_->exact_time()) {
      h_->Advance(expected_delay - 1);
      EXPECT_TRUE(MustReserve(q(), queue).empty()) << "retried before its back-off";
    }
    expected_delay *= 2;
  }
  // An explicit retry delay wins over the back-off.
  auto got = ReceiveAll(*h_, queue, 1, 250, 100);
  ASSERT_EQ(got.size(), 1u);
  auto nack = q().Nack(queue, {got[0].receipt, 0, "", false});
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(ReserveEventually(*h_, queue).size(), 1u);
  EXPECT_EQ(MustStats(q(), queue).counters.nacked, 4u);
}

TEST_P(QueueConformance, LastAttemptGoesDeadAndReplayResetsAttempt) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("fragile");
  r.max_attempts = 2;
  EnqueueResult e = MustEnqueue(q(), queue, r);
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(q().Nack(queue, {got[0].receipt, 0, "first failure", false}).ok());
  got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].attempt, 2);
  auto nack = q().Nack(queue, {got[0].receipt, 0, "second failure", false});
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(nack->state, JobState::kDead);
  EXPECT_TRUE(MustReserve(q(), queue).empty());
  EXPECT_EQ(q().Ack(queue, got[0].receipt).code(), Code::kLeaseExpired);

  auto dead = q().ListDead(queue, 100);
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].id, e.id);
  EXPECT_EQ((*dead)[0].state, JobState::kDead);
  EXPECT_EQ((*dead)[0].attempt, 2);
  EXPECT_EQ((*dead)[0].last_error, "second failure");
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.counters.dead, 1u);

  auto replayed = q().ReplayDead(queue, {});
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_EQ(*replayed, 1);
  auto job = q().Get(queue, JobRef::ById(e.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReady);
  EXPECT_EQ(job->attempt, 0);
  EXPECT_EQ(job->last_error, "second failure") << "replay clears nothing but the dead state";
  EXPECT_EQ(MustStats(q(), queue).dead, 0);
  got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].attempt, 1);
  // Explicitly dead at once, even with attempts left.
  auto now_dead = q().Nack(queue, {got[0].receipt, std::nullopt, "poison", true});
  ASSERT_TRUE(now_dead.ok());
  EXPECT_EQ(now_dead->state, JobState::kDead);
}

TEST_P(QueueConformance, ExpiredLeaseOnTheLastAttemptGoesDead) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("crashy");
  r.max_attempts = 1;
  MustEnqueue(q(), queue, r);
  ASSERT_EQ(MustReserve(q(), queue, 1, 1000).size(), 1u);
  h_->Advance(h_->exact_time() ? 1000 : 1200);
  QueueStats s = StatsWhen(*h_, queue, [](const QueueStats& st) { return st.dead == 1; });
  EXPECT_TRUE(MustReserve(q(), queue).empty());
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.reserved, 0);
  auto dead = q().ListDead(queue, 10);
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_NE((*dead)[0].last_error.find("lease expired"), std::string::npos) << (*dead)[0].last_error;
}

// A dead job is kept for its queue's dead_retention_ms and then deleted, by every store: never
// before, and at that moment (within a scheduling step) — on Redis too, where it was once kept
// forever. Each job runs out on its own clock: a later death is kept longer.
TEST_P(QueueConformance, DeadJobsAreDeletedOnceTheirRetentionRunsOut) {
  const std::string queue = QueueName();
  QueueConfig config;
  config.max_attempts = 1;
  // On a real clock the two deaths are a second apart, room for a slow sweep or a slow look.
  config.dead_retention_ms = h_->exact_time() ? std::max<int64_t>(1'000, 4 * h_->unit_ms()) : 2'000;
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  auto kill = [&](const std::string& payload) -> delayq::Job {
    MustEnqueue(q(), queue, Job(payload));
    auto got = MustReserve(q(), queue, 1);
    if (got.size() != 1) return {};
    auto r = q().Nack(queue, {.receipt = got[0].receipt, .error = "boom"});
    EXPECT_TRUE(r.ok() && r->state == JobState::kDead);
    auto job = q().Get(queue, JobRef::ById(got[0].id));
    EXPECT_TRUE(job.ok() && job->state == JobState::kDead);
    return job.ok() ? *job : delayq::Job{};
  };
  const delayq::Job first = kill("1");
  h_->Advance(config.dead_retention_ms / 2);
  const delayq::Job second = kill("2");
  ASSERT_GT(first.dead_at_ms, 0);
  ASSERT_GT(second.dead_at_ms, first.dead_at_ms);

  // Lets time pass up to `not_before`, where `job` must still be there, then in small steps
  // until it is gone: never earlier, and soon after.
  auto expect_deleted_at = [&](const delayq::Job& job, int64_t not_before) {
    const int64_t step = h_->exact_time() ? 1 : 20;
    if (h_->NowMs() < not_before - step) h_->Advance(not_before - step - h_->NowMs());
    auto there = q().Get(queue, JobRef::ById(job.id));
    if (h_->NowMs() < not_before) {
      EXPECT_TRUE(there.ok()) << "deleted before its retention ran out";
    }
    for (int64_t waited = 0; waited <= 3'000; waited += step) {
      h_->Advance(step);
      auto j = q().Get(queue, JobRef::ById(job.id));
      const int64_t after = h_->NowMs();
      if (!j.ok()) {
        EXPECT_EQ(j.code(), Code::kNotFound) << j.status().ToString();
        EXPECT_GE(after, not_before) << "deleted before its retention ran out";
        return;
      }
    }
    ADD_FAILURE() << "dead job " << job.id << " still there 3 s after its retention ran out";
  };
  expect_deleted_at(first, first.dead_at_ms + config.dead_retention_ms);
  EXPECT_TRUE(q().Get(queue, JobRef::ById(second.id)).ok()) << "the later death must be kept longer";
  EXPECT_EQ(MustStats(q(), queue).dead, 1);
  expect_deleted_at(second, second.dead_at_ms + config.dead_retention_ms);
  EXPECT_EQ(MustStats(q(), queue).dead, 0);
  auto listed = q().ListDead(queue, 10);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

// A nack that sends a job to dead answers the due time the job had (and keeps it: Get shows the
// same), on every store; Redis answered 0 and then showed the time of death.
TEST_P(QueueConformance, ANackThatKillsAJobAnswersItsDueTime) {
  const std::string queue = QueueName();
  QueueConfig config;
  config.max_attempts = 1;
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  MustEnqueue(q(), queue, Job("x"));
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  h_->Advance(h_->unit_ms());
  auto r = q().Nack(queue, {.receipt = got[0].receipt, .error = "boom"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, JobState::kDead);
  EXPECT_EQ(r->due_at_ms, got[0].due_at_ms);
  auto job = q().Get(queue, JobRef::ById(got[0].id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kDead);
  EXPECT_EQ(job->due_at_ms, got[0].due_at_ms);
  EXPECT_GE(job->dead_at_ms, got[0].due_at_ms + h_->unit_ms());
}

TEST_P(QueueConformance, ReplaySelectedIdsAndPurge) {
  const std::string queue = QueueName();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    EnqueueRequest r = Job("d" + std::to_string(i));
    r.max_attempts = 1;
    ids.push_back(MustEnqueue(q(), queue, r).id);
  }
  for (auto& d : MustReserve(q(), queue)) {
    ASSERT_TRUE(q().Nack(queue, {d.receipt, 0, "x", false}).ok());
  }
  ASSERT_EQ(MustStats(q(), queue).dead, 5);
  std::vector<std::string> pick = {ids[1], ids[3], "01JDQ8Z3K6T6V3W1C9X2N4M5PQ"};
  auto replayed = q().ReplayDead(queue, pick);
  ASSERT_TRUE(replayed.ok());
  EXPECT_EQ(*replayed, 2);
  EXPECT_EQ(q().ReplayDead(queue, std::vector<std::string>{"bad id"}).code(), Code::kInvalidArgument);
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 2u);
  std::set<std::string> got_ids = {got[0].id, got[1].id};
  EXPECT_EQ(got_ids, (std::set<std::string>{ids[1], ids[3]}));
  auto purged = q().PurgeDead(queue);
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 3);
  EXPECT_EQ(MustStats(q(), queue).dead, 0);
  EXPECT_EQ(q().Get(queue, JobRef::ById(ids[0])).code(), Code::kNotFound);
  auto dead = q().ListDead(queue, 10);
  ASSERT_TRUE(dead.ok());
  EXPECT_TRUE(dead->empty());
}

// A dead job releases its key; replayed after another job took the key, it comes back without
// one, so no two live jobs show the same key. (Found by delayq-check.)
TEST_P(QueueConformance, ReplayedJobWhoseKeyWasTakenComesBackWithoutIt) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("first");
  r.key = "order-7";
  r.max_attempts = 1;
  const std::string first = MustEnqueue(q(), queue, r).id;
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(q().Nack(queue, {got[0].receipt, 0, "x", false}).ok());
  r.payload = "second";
  EnqueueResult second = MustEnqueue(q(), queue, r);
  EXPECT_FALSE(second.duplicate) << "a dead job releases its key";
  EXPECT_NE(second.id, first);
  auto replayed = q().ReplayDead(queue, std::vector<std::string>{first});
  ASSERT_TRUE(replayed.ok());
  EXPECT_EQ(*replayed, 1);
  auto job = q().Get(queue, JobRef::ById(first));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReady);
  EXPECT_EQ(job->key, "") << "the key belongs to the live job " << second.id;
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("order-7"))->id, second.id);
  // With the key free, a replay takes it back.
  EnqueueRequest other = Job("other");
  other.key = "order-8";
  other.max_attempts = 1;
  const std::string third = MustEnqueue(q(), queue, other).id;
  for (auto& d : MustReserve(q(), queue)) {
    if (d.id == third) {
      ASSERT_TRUE(q().Nack(queue, {d.receipt, 0, "x", false}).ok());
    }
  }
  ASSERT_EQ(*q().ReplayDead(queue, std::vector<std::string>{third}), 1);
  EXPECT_EQ(q().Get(queue, JobRef::ById(third))->key, "order-8");
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("order-8"))->id, third);
}

}  // namespace
}  // namespace delayq::testing
