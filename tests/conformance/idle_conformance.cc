// Waiting costs nothing: reserves that wait hold no CPU while nothing can be handed to them, on
// a queue that does not exist (never made, deleted, force-deleted) or one whose ready jobs are
// held back (paused, at max_reserved, out of rate tokens, a group at its cap). Each is answered
// with a job the moment one can be handed out. Consumers usually start before producers; each
// waiting consumer that spun a core on every server was a bug here (the Redis store, a queue it
// could not find).
#include <chrono>
#include <thread>

#include "conformance/helpers.h"

namespace delayq::testing {
namespace {

constexpr int kWaiters = 4;
// The window over which CPU is measured, and the most CPU the store's process may use in it: a
// spinning loop uses the whole window; an idle one a few milliseconds (a loaded machine or a
// sanitizer build adds some, never a quarter of the window).
constexpr auto kWindow = std::chrono::milliseconds(1200);
constexpr double kMaxBusyShare = 0.25;
// Far longer than a test: a waiter that answers with a job was woken, not timed out.
constexpr int64_t kLongWaitMs = 60'000;

using Waiting = std::vector<std::future<Result<std::vector<Delivery>>>>;

Waiting StartWaiters(Queue& q, const std::string& queue, int n = kWaiters) {
  Waiting waiting;
  for (int i = 0; i < n; ++i) waiting.push_back(ReserveWaiting(q, queue, kLongWaitMs));
  return waiting;
}

// The store's CPU over kWindow while `waiting` wait, none of them answered.
void ExpectIdle(QueueHarness& h, Waiting& waiting, const std::string& what) {
  const double before = h.StoreCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(kWindow);  // a measurement window, not a synchronisation
  const double used = h.StoreCpuSeconds() - before;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(used, kMaxBusyShare * seconds)
      << waiting.size() << " reserves waiting on " << what << " used " << used << " s of CPU in " << seconds << " s";
  for (auto& w : waiting) {
    ASSERT_EQ(w.wait_for(std::chrono::seconds(0)), std::future_status::timeout) << "answered before any job";
  }
}

int JobsGot(Waiting& waiting) {
  int got = 0;
  for (auto& w : waiting) {
    auto r = Await(w);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) got += static_cast<int>(r->size());
  }
  return got;
}

// Holds kWaiters reserves on `queue` (which does not exist) for kWindow and checks the store's
// CPU over that time; then enqueues one due job per waiter and checks that each waiter gets one.
void ExpectWaitersIdleThenServed(QueueHarness& h, const std::string& queue, const std::string& what) {
  SCOPED_TRACE(what);
  Waiting waiting = StartWaiters(h.queue(), queue);
  ExpectIdle(h, waiting, what);
  for (int i = 0; i < kWaiters; ++i) MustEnqueue(h.queue(), queue, Job("j" + std::to_string(i)));
  EXPECT_EQ(JobsGot(waiting), kWaiters) << "each waiter gets a job as soon as the queue has one";
}

TEST_P(QueueConformance, ReservesWaitingOnAMissingQueueHoldNoCpuAndGetTheFirstJobs) {
  ExpectWaitersIdleThenServed(*h_, QueueName(), "a queue never made");
}

TEST_P(QueueConformance, ReservesWaitingOnADeletedQueueHoldNoCpuAndGetTheFirstJobs) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("gone"));
  auto d = MustReserve(q(), queue);
  ASSERT_EQ(d.size(), 1u);
  ASSERT_TRUE(q().Ack(queue, d[0].receipt).ok());
  ASSERT_TRUE(q().DeleteQueue(queue, false).ok());
  ExpectWaitersIdleThenServed(*h_, queue, "a deleted queue");
}

TEST_P(QueueConformance, ReservesWaitingOnAForceDeletedQueueHoldNoCpuAndGetTheFirstJobs) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("later", 3'600'000));
  MustEnqueue(q(), queue, Job("now"));
  auto forced = q().DeleteQueue(queue, true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ(*forced, 2);
  ExpectWaitersIdleThenServed(*h_, queue, "a force-deleted queue");
}

TEST_P(QueueConformance, ReservesWaitingOnAPausedQueueWithReadyJobsHoldNoCpu) {
  const std::string queue = QueueName();
  for (int i = 0; i < kWaiters; ++i) MustEnqueue(q(), queue, Job("ready"));
  ASSERT_TRUE(q().Pause(queue).ok());
  Waiting waiting = StartWaiters(q(), queue);
  ExpectIdle(*h_, waiting, "a paused queue with ready jobs");
  ASSERT_TRUE(q().Resume(queue).ok());
  EXPECT_EQ(JobsGot(waiting), kWaiters);
}

TEST_P(QueueConformance, ReservesHeldBackByFlowControlHoldNoCpu) {
  const std::string queue = QueueName();
  QueueConfig c;
  c.max_reserved = 1;
  ASSERT_TRUE(q().SetConfig(queue, c).ok());
  for (int i = 0; i < kJobsForEveryShard; ++i) MustEnqueue(q(), queue, Job("capped"));
  auto held = TakeUntilHeldBack(q(), queue);
  ASSERT_FALSE(held.empty());
  ASSERT_LT(held.size(), 8u) << "max_reserved holds";
  Waiting waiting = StartWaiters(q(), queue, 1);
  ExpectIdle(*h_, waiting, "a queue at max_reserved");
  for (const Delivery& d : held) ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
  EXPECT_EQ(JobsGot(waiting), 1) << "an ack frees room under the cap";

  // A rate far below what the test waits: the bucket's token is spent, the next is an hour off.
  const std::string rated = QueueName();
  QueueConfig r;
  r.rate_per_s = 1.0 / 3600;
  r.burst = 1;
  ASSERT_TRUE(q().SetConfig(rated, r).ok());
  for (int i = 0; i < kJobsForEveryShard; ++i) MustEnqueue(q(), rated, Job("rated"));
  ASSERT_FALSE(TakeUntilHeldBack(q(), rated).empty());
  Waiting slow = StartWaiters(q(), rated, 1);
  ExpectIdle(*h_, slow, "a queue out of rate tokens");

  // Both limits, the cap the one that holds (the bucket still has tokens): no token is awaited,
  // only a lease's end. Found on the PostgreSQL store, whose scheduler looked again every ms.
  const std::string both = QueueName();
  QueueConfig b;
  b.max_reserved = 1;
  b.rate_per_s = 1000;
  b.burst = 1000;
  ASSERT_TRUE(q().SetConfig(both, b).ok());
  for (int i = 0; i < kJobsForEveryShard; ++i) MustEnqueue(q(), both, Job("both"));
  auto capped = TakeUntilHeldBack(q(), both);
  ASSERT_FALSE(capped.empty());
  Waiting at_cap = StartWaiters(q(), both, 1);
  ExpectIdle(*h_, at_cap, "a queue at max_reserved with tokens to spare");
  for (const Delivery& d : capped) ASSERT_TRUE(q().Ack(both, d.receipt).ok());
  EXPECT_EQ(JobsGot(at_cap), 1) << "an ack frees room under the cap";
}

TEST_P(QueueConformance, ReservesHeldBackByAGroupCapHoldNoCpu) {
  const std::string queue = QueueName();
  QueueConfig c;
  c.group_max_reserved = 1;
  ASSERT_TRUE(q().SetConfig(queue, c).ok());
  for (int i = 0; i < kJobsForEveryShard; ++i) {
    EnqueueRequest j = Job("tenant");
    j.group = "tenant-a";
    MustEnqueue(q(), queue, j);
  }
  auto held = TakeUntilHeldBack(q(), queue);
  ASSERT_FALSE(held.empty());
  ASSERT_LT(held.size(), 8u) << "group_max_reserved holds";
  Waiting waiting = StartWaiters(q(), queue, 1);
  ExpectIdle(*h_, waiting, "a group at group_max_reserved");
  for (const Delivery& d : held) ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
  EXPECT_EQ(JobsGot(waiting), 1) << "an ack frees room in the group";
}

}  // namespace
}  // namespace delayq::testing
