// The Queue conformance suite (queue_conformance.h): reserves: their byte bound, a paused queue,
// and waiting reserves.
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

// Redeliveries after a lease ran out keep the byte bound too (on Redis, the claim of pending
// entries is sized before it is made).
TEST_P(QueueConformance, RedeliveriesKeepTheMaxBytesBound) {
  const std::string queue = QueueName();
  for (int i = 0; i < 3; ++i) MustEnqueue(q(), queue, Job("\"" + std::string(100'000, 'r') + "\""));
  ASSERT_EQ(MustReserve(q(), queue, 10, 1000).size(), 3u);
  h_->Advance(h_->exact_time() ? 1000 : 1100);
  // On a real clock the store's reaper gives the jobs back a moment after their leases ran out
  // (later on a loaded machine): let time pass in small steps until it has.
  auto one = MustReserveBytes(q(), queue, 150'000);
  for (int i = 0; i < 100 && one.empty() && !h_->exact_time(); ++i) {
    h_->Advance(50);
    one = MustReserveBytes(q(), queue, 150'000);
  }
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].attempt, 2);
  auto rest = MustReserve(q(), queue, 10);
  ASSERT_EQ(rest.size(), 2u);
  for (const auto& d : rest) EXPECT_EQ(d.attempt, 2);
}

// One answer's bytes are bounded: it stops before the job whose stored record would take it
// over max_bytes, the first job always comes, and the rest stay ready in order. Both stores
// count the same encoded records, so the same request answers the same jobs.
TEST_P(QueueConformance, AReserveAnswerStopsAtMaxBytes) {
  const std::string queue = QueueName();
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    EnqueueRequest r = Job("\"" + std::string(100'000, static_cast<char>('a' + i)) + "\"");
    ids.push_back(MustEnqueue(q(), queue, r).id);
  }
  auto three = MustReserveBytes(q(), queue, 350'000);
  ASSERT_EQ(three.size(), 3u);
  std::set<std::string> seen;  // in due order on one shard; a sharded queue orders per shard
  for (const auto& d : three) seen.insert(d.id);
  auto one = MustReserveBytes(q(), queue, 1);
  ASSERT_EQ(one.size(), 1u) << "the first job comes whatever its size";
  seen.insert(one[0].id);
  // A waiting reserve keeps its bound when jobs arrive.
  const std::string later = QueueName();
  ReserveRequest w;
  w.max = 10;
  w.wait_ms = 60'000;
  w.max_bytes = 150'000;
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto future = promise->get_future();
  q().ReserveAsync(later, w, [promise](Result<std::vector<Delivery>> res) { promise->set_value(std::move(res)); });
  std::vector<EnqueueRequest> batch(3, Job("\"" + std::string(100'000, 'z') + "\""));
  auto enqueued = q().EnqueueBatch(later, batch);
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  auto waited = Await(future);
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->size(), 1u);
  auto rest = MustReserve(q(), queue);
  ASSERT_EQ(rest.size(), 2u);
  for (const auto& d : rest) seen.insert(d.id);
  EXPECT_EQ(seen, std::set<std::string>(ids.begin(), ids.end())) << "a job was answered twice or lost";
  EXPECT_EQ(MustStats(q(), later).ready, 2);
  ReserveRequest zero;
  zero.max_bytes = 0;
  EXPECT_EQ(q().Reserve(queue, zero).code(), Code::kInvalidArgument);
}

// A bound that falls beyond the first records read (the embedded store reads 8, 16, 32, ...):
// the answer still stops at the first job that would go over, and the rest stay ready.
TEST_P(QueueConformance, AReserveOfManyStopsAtMaxBytesPastItsFirstReads) {
  const std::string queue = QueueName();
  std::vector<EnqueueRequest> batch(100, Job("\"" + std::string(1000, 'p') + "\""));
  auto enqueued = q().EnqueueBatch(queue, batch);
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  ReserveRequest r;
  r.max = 100;
  r.max_bytes = 30'000;  // each record holds a 1 002-byte payload and some bytes more
  auto got = q().Reserve(queue, r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_GE(got->size(), 25u);
  EXPECT_LE(got->size(), 29u);
  std::set<std::string> seen;
  for (const auto& d : *got) seen.insert(d.id);
  auto rest = q().Reserve(queue, {100, 0, std::nullopt});
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(got->size() + rest->size(), 100u);
  for (const auto& d : *rest) EXPECT_TRUE(seen.insert(d.id).second) << d.id << " answered twice";
}

TEST_P(QueueConformance, PausedQueueHandsOutNothing) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("a"));
  ASSERT_TRUE(q().Pause(queue).ok());
  EXPECT_TRUE(MustReserve(q(), queue).empty());
  MustEnqueue(q(), queue, Job("b", h_->unit_ms()));
  h_->Advance(2 * h_->unit_ms());
  QueueStats s = StatsWhen(*h_, queue, [](const QueueStats& st) { return st.ready == 2; });
  EXPECT_TRUE(s.paused);
  EXPECT_EQ(s.ready, 2) << "jobs still come due while paused";
  auto waiting = ReserveWaiting(q(), queue, 60'000, 10);
  ASSERT_TRUE(q().Resume(queue).ok());
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok());
  if (!h_->ordered() && got->size() == 1) {  // shards resume one by one: the rest follows
    auto rest = MustReserve(q(), queue);
    got->insert(got->end(), rest.begin(), rest.end());
  }
  EXPECT_EQ(got->size(), 2u);
  EXPECT_FALSE(MustStats(q(), queue).paused);
}

TEST_P(QueueConformance, WaitingReserveIsAnsweredWhenAJobArrivesOrComesDue) {
  const std::string queue = QueueName();
  auto waiting = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult e = MustEnqueue(q(), queue, Job("wake up"));
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, e.id);

  waiting = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult later = MustEnqueue(q(), queue, Job("due soon", 2 * h_->unit_ms()));
  h_->Advance(2 * h_->unit_ms());
  got = Await(waiting);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, later.id);
  EXPECT_GE(h_->NowMs(), later.due_at_ms);
}

// The long-poll paths besides "a job arrives": a client that hangs up, a pause and a resume, a
// config change. Each waiting reserve is answered exactly once, and no job is handed to a
// waiter that is gone.
TEST_P(QueueConformance, EveryWaitingReserveIsAnsweredOnceThroughHangUpPauseAndConfigChanges) {
  const std::string queue = QueueName();
  // A client hangs up: its waiter answers empty at once, and a job enqueued afterwards goes to
  // the next waiter, not to the one that left.
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto gone = promise->get_future();
  std::atomic<int> calls{0};
  ReserveRequest r;
  r.wait_ms = 60'000;
  const uint64_t handle = q().ReserveAsync(queue, r, [promise, &calls](Result<std::vector<Delivery>> res) {
    if (calls.fetch_add(1) == 0) promise->set_value(std::move(res));
  });
  q().CancelReserve(handle);
  auto left = Await(gone);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
  auto next = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult first = MustEnqueue(q(), queue, Job("for the next waiter"));
  auto got = Await(next);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, first.id);
  q().CancelReserve(handle);  // a second hang-up of an answered waiter changes nothing
  EXPECT_EQ(calls.load(), 1);

  // A paused queue hands nothing to a waiter; the resume does.
  ASSERT_TRUE(q().Pause(queue).ok());
  auto paused = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult second = MustEnqueue(q(), queue, Job("after the resume"));
  auto job = q().Get(queue, JobRef::ById(second.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReady);
  ASSERT_TRUE(q().Resume(queue).ok());
  got = Await(paused);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, second.id);

  // A config change while a reserve waits: the waiter is still served, with the queue's lease as
  // read during its wait (the old or the new one: the Redis store reads the config before it
  // runs the reserve script, and a pass that began before the change may take the job).
  auto waiting = ReserveWaiting(q(), queue, 60'000);
  auto config = q().GetConfig(queue);
  ASSERT_TRUE(config.ok());
  const int64_t old_lease_ms = config->lease_ms;
  config->lease_ms = 7'000;
  ASSERT_TRUE(q().SetConfig(queue, *config).ok());
  EnqueueResult third = MustEnqueue(q(), queue, Job("after the config change"));
  got = Await(waiting);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, third.id);
  const int64_t lease_left = (*got)[0].lease_deadline_ms - h_->NowMs();
  const bool new_lease = lease_left > 7'000 - 2'000 && lease_left < 7'000 + 2'000;
  const bool old_lease = lease_left > old_lease_ms - 2'000 && lease_left < old_lease_ms + 2'000;
  EXPECT_TRUE(new_lease || old_lease) << "a lease of " << lease_left << " ms is neither the old nor the new one";
  // A reserve that starts after the change gets the new lease.
  EnqueueResult fourth = MustEnqueue(q(), queue, Job("later"));
  auto d = MustReserve(q(), queue);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, fourth.id);
  EXPECT_NEAR(static_cast<double>(d[0].lease_deadline_ms - h_->NowMs()), 7'000.0, 2'000.0);
}

TEST_P(QueueConformance, WaitingReserveTimesOutEmpty) {
  const std::string queue = QueueName();
  auto waiting = ReserveWaiting(q(), queue, 2 * h_->unit_ms());
  h_->Advance(2 * h_->unit_ms() + (h_->exact_time() ? 0 : 200));
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

}  // namespace
}  // namespace delayq::testing
