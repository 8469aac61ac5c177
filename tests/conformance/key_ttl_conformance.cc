// The conformance suite, idempotency after completion (EnqueueRequest::key_ttl_ms) on every
// store: the key stays taken for key_ttl_ms after an ack or a cancel, not after a death; it
// survives a restart; racing producers all get the finished job; bad values are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

EnqueueRequest Keyed(const std::string& key, int64_t key_ttl_ms, std::optional<int64_t> delay_ms = std::nullopt) {
  EnqueueRequest r = Job("keyed", delay_ms);
  r.key = key;
  r.key_ttl_ms = key_ttl_ms;
  return r;
}

// Reserves and acks the one ready job of `queue`.
void AckOne(Queue& q, const std::string& queue) {
  auto got = MustReserve(q, queue, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(q.Ack(queue, got[0].receipt).ok());
}

}  // namespace

TEST_P(QueueConformance, AKeyTtlKeepsTheKeyTakenAfterAnAckOrACancel) {
  const std::string queue = QueueName();
  // On a real clock the window holds ten calls: room for a slow machine (a sanitizer build).
  const int64_t ttl = h_->exact_time() ? 4 * h_->unit_ms() : 2'500;
  const EnqueueResult first = MustEnqueue(q(), queue, Keyed("order-1", ttl));
  AckOne(q(), queue);
  // Within the window: a duplicate of the finished job, even asking to replace it.
  EnqueueResult again = MustEnqueue(q(), queue, Keyed("order-1", ttl));
  EXPECT_TRUE(again.duplicate);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(again.due_at_ms, first.due_at_ms);
  EnqueueRequest replace = Keyed("order-1", ttl);
  replace.replace = true;
  EnqueueResult replaced = MustEnqueue(q(), queue, replace);
  EXPECT_TRUE(replaced.duplicate);
  EXPECT_FALSE(replaced.replaced) << "a finished job is not brought back by a replace";
  EXPECT_EQ(replaced.id, first.id);
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("order-1")).code(), Code::kNotFound) << "the job itself is gone";
  EXPECT_EQ(MustStats(q(), queue).ready, 0) << "no job was made";

  // A cancel keeps it too; a death does not (a dead job can be replayed, it is not done).
  const EnqueueResult cancelled = MustEnqueue(q(), queue, Keyed("order-2", ttl, 100 * h_->unit_ms()));
  ASSERT_TRUE(q().Cancel(queue, JobRef::ById(cancelled.id)).ok());
  EXPECT_EQ(MustEnqueue(q(), queue, Keyed("order-2", ttl)).id, cancelled.id);
  EnqueueRequest mortal = Keyed("order-3", ttl);
  mortal.max_attempts = 1;
  MustEnqueue(q(), queue, mortal);
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(q().Nack(queue, {got[0].receipt, std::nullopt, "boom", false})->state, JobState::kDead);
  EXPECT_FALSE(MustEnqueue(q(), queue, Keyed("order-3", ttl)).duplicate);
  // Once the window is over the key is free: a new job.
  h_->Advance(ttl + h_->unit_ms());
  const EnqueueResult later = MustEnqueue(q(), queue, Keyed("order-1", ttl));
  EXPECT_FALSE(later.duplicate);
  EXPECT_NE(later.id, first.id);
  EXPECT_FALSE(MustEnqueue(q(), queue, Keyed("order-2", 0)).duplicate);
  auto job = q().Get(queue, JobRef::ByKey("order-1"));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->id, later.id);
}

TEST_P(QueueConformance, WithoutAKeyTtlTheKeyIsFreeOnceTheJobIsDone) {
  const std::string queue = QueueName();
  const EnqueueResult first = MustEnqueue(q(), queue, Keyed("k", 0));
  AckOne(q(), queue);
  const EnqueueResult second = MustEnqueue(q(), queue, Keyed("k", 0));
  EXPECT_FALSE(second.duplicate);
  EXPECT_NE(second.id, first.id);
}

// The ttl belongs to the job's latest content: a replace without one clears it, a replace with
// one sets it (the Redis store deletes a ttl only for a job that existed: a new id has none).
TEST_P(QueueConformance, AReplaceSetsOrClearsTheKeyTtlOfTheJobItReplaces) {
  const std::string queue = QueueName();
  const int64_t ttl = 4 * h_->unit_ms();
  const EnqueueResult first = MustEnqueue(q(), queue, Keyed("k", ttl, 100 * h_->unit_ms()));
  EnqueueRequest without = Keyed("k", 0);
  without.replace = true;
  const EnqueueResult replaced = MustEnqueue(q(), queue, without);
  ASSERT_TRUE(replaced.replaced);
  EXPECT_EQ(replaced.id, first.id);
  AckOne(q(), queue);
  EXPECT_FALSE(MustEnqueue(q(), queue, Keyed("other", 0)).duplicate);
  const EnqueueResult fresh = MustEnqueue(q(), queue, Keyed("k", 0, 100 * h_->unit_ms()));
  EXPECT_FALSE(fresh.duplicate) << "the replaced content had no key ttl: the key is free after the ack";

  EnqueueRequest with = Keyed("k", ttl);
  with.replace = true;
  ASSERT_TRUE(MustEnqueue(q(), queue, with).replaced);
  auto got = MustReserve(q(), queue, 2);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& d : got) ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
  const EnqueueResult again = MustEnqueue(q(), queue, Keyed("k", 0));
  EXPECT_TRUE(again.duplicate) << "the replacing content's key ttl holds the key after the ack";
  EXPECT_EQ(again.id, fresh.id);
}

TEST_P(QueueConformance, BadKeyTtlsAreRefusedAndStoreNothing) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("seed", 100 * h_->unit_ms()));
  EnqueueRequest no_key = Job("x");
  no_key.key_ttl_ms = 1000;
  auto r = q().Enqueue(queue, no_key);
  EXPECT_EQ(r.code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("key_ttl_ms is set without a key"), std::string::npos) << r.status().ToString();
  for (int64_t bad : {int64_t{-1}, Limits::kMaxKeyTtlMs + 1}) {
    auto e = q().Enqueue(queue, Keyed("k", bad));
    EXPECT_EQ(e.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(e.status().message().find("key_ttl_ms is " + std::to_string(bad)), std::string::npos)
        << e.status().ToString();
  }
  std::vector<EnqueueRequest> batch = {Keyed("a", 1000), Keyed("b", -5)};
  auto b = q().EnqueueBatch(queue, batch);
  EXPECT_EQ(b.code(), Code::kInvalidArgument);
  EXPECT_NE(b.status().message().find("jobs[1].key_ttl_ms"), std::string::npos) << b.status().ToString();
  EXPECT_EQ(MustStats(q(), queue).scheduled + MustStats(q(), queue).ready, 1) << "nothing was stored";
  EXPECT_TRUE(q().Enqueue(queue, Keyed("max", Limits::kMaxKeyTtlMs)).ok());
}

// Producers racing to enqueue a finished job's key again, with others sending bad requests in
// between, all get the finished job: no second job is made.
TEST_P(QueueConformance, RacingProducersAllGetTheFinishedJobWhileItsKeyIsKept) {
  const std::string queue = QueueName();
  const int64_t ttl = 100 * h_->unit_ms();
  const EnqueueResult first = MustEnqueue(q(), queue, Keyed("pay-7", ttl));
  AckOne(q(), queue);
  std::atomic<int> same{0}, other{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto e = q().Enqueue(queue, Keyed("pay-7", ttl));
        if (e.ok() && e->duplicate && e->id == first.id) {
          ++same;
        } else {
          ++other;
        }
        if (t % 2 == 0) {
          EnqueueRequest bad = Keyed("", 5);
          if (q().Enqueue(queue, bad).code() == Code::kInvalidArgument) ++refused;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(same.load(), 100);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(refused.load(), 50);
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.ready + s.scheduled + s.reserved, 0) << "no second job";
}

// A kept key is stored like the jobs: it holds across a restart (the store's, or the server's
// after kill -9), and a replayed dead job does not take a key a finished job keeps.
TEST_P(QueueConformance, AKeptKeySurvivesARestartAndHoldsAgainstAReplay) {
  const std::string queue = QueueName();
  const int64_t ttl = 100 * h_->unit_ms();
  EnqueueRequest mortal = Keyed("inv-9", 0);
  mortal.max_attempts = 1;
  const EnqueueResult dead = MustEnqueue(q(), queue, mortal);
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(q().Nack(queue, {got[0].receipt, std::nullopt, "boom", true})->state, JobState::kDead);
  const EnqueueResult done = MustEnqueue(q(), queue, Keyed("inv-9", ttl));
  ASSERT_FALSE(done.duplicate);
  AckOne(q(), queue);
  h_->Restart();
  EnqueueResult again = MustEnqueue(q(), queue, Keyed("inv-9", ttl));
  EXPECT_TRUE(again.duplicate) << "the kept key was lost in the restart";
  EXPECT_EQ(again.id, done.id);
  const std::vector<std::string> ids = {dead.id};
  auto replayed = q().ReplayDead(queue, ids);
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_EQ(*replayed, 1);
  auto job = q().Get(queue, JobRef::ById(dead.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->key, "") << "the kept key holds: the replayed job comes back without it";
}

}  // namespace delayq::testing
