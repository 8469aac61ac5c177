// The conformance suite, flow control (QueueConfig::rate_per_s, burst, max_reserved; docs/http-api.md, Flow control)
// on every store: a reserve hands out no more than the token bucket and the cap allow, a waiting
// reserve held back goes on when a token comes or a lease ends, held-back time is not lateness,
// many threads at once never pass the cap, and bad limits are refused.
//
// A queue split into shards (ordered() false) holds an even share of each limit per shard,
// rounded up: there the suite checks the bounds that still hold, not exact counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

// At most as many shards as the suite's sharded harnesses use.
constexpr int64_t kMaxShards = 4;

void Fill(Queue& q, const std::string& queue, int n) {
  std::vector<EnqueueRequest> jobs;
  for (int i = 0; i < n; ++i) jobs.push_back(Job("job " + std::to_string(i)));
  auto r = q.EnqueueBatch(queue, jobs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

QueueConfig Limited(double rate_per_s, int64_t burst, int64_t max_reserved) {
  QueueConfig c;
  c.rate_per_s = rate_per_s;
  c.burst = burst;
  c.max_reserved = max_reserved;
  return c;
}

}  // namespace

TEST_P(QueueConformance, ARateLimitHandsOutTheBurstThenTheRate) {
  const std::string queue = QueueName();
  // 2 a second on a manual clock; 1 a second on a real one (a token is then a second away, far
  // more than two calls in a row take).
  const double rate = h_->exact_time() ? 2 : 1;
  ASSERT_TRUE(q().SetConfig(queue, Limited(rate, 3, 0)).ok());
  auto stored = q().GetConfig(queue);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->rate_per_s, rate);
  EXPECT_EQ(stored->burst, 3);
  Fill(q(), queue, 20);
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 20; });
  const auto start = std::chrono::steady_clock::now();
  const int64_t start_ms = h_->NowMs();
  size_t total = 0;
  auto first = MustReserve(q(), queue, 10);
  auto second = MustReserve(q(), queue, 10);
  total += first.size() + second.size();
  if (h_->ordered()) {
    EXPECT_EQ(first.size(), 3u) << "the first reserve takes the whole burst";
    EXPECT_LE(second.size(), h_->exact_time() ? 0u : 1u) << "the bucket is empty right after";
  } else {
    EXPECT_GE(first.size(), 1u);
    EXPECT_LE(first.size(), static_cast<size_t>(kMaxShards));  // a token per shard, at most
  }
  h_->Advance(1000);
  auto third = MustReserve(q(), queue, 10);
  total += third.size();
  if (h_->ordered() && h_->exact_time()) {
    EXPECT_EQ(third.size(), 2u) << "a second of tokens at 2 a second";
  }
  if (h_->ordered()) {
    EXPECT_GE(third.size(), 1u) << "a token came in a second";
  }
  // Whatever the timing, never more than the burst and the tokens of the time that passed.
  const double elapsed_s = h_->exact_time()
                               ? (h_->NowMs() - start_ms) / 1000.0
                               : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double bound = (h_->ordered() ? 3.0 : 3.0 + kMaxShards) + rate * elapsed_s + 1;
  EXPECT_LE(static_cast<double>(total), bound);
  EXPECT_EQ(MustStats(q(), queue).reserved, static_cast<int64_t>(total));

  // Unlimited again: every ready job at once.
  ASSERT_TRUE(q().SetConfig(queue, QueueConfig{}).ok());
  EXPECT_EQ(MustReserve(q(), queue, 100).size(), 20 - total);
}

TEST_P(QueueConformance, MaxReservedCapsTheLeasesAndAnEndedLeaseLetsAWaitingReserveOn) {
  const std::string queue = QueueName();
  ASSERT_TRUE(q().SetConfig(queue, Limited(0, 0, 2)).ok());
  // Enough jobs that every shard of a sharded queue has ready ones left throughout.
  const int jobs = h_->ordered() ? 6 : 40;
  Fill(q(), queue, jobs);
  (void)StatsWhen(*h_, queue, [&](const QueueStats& s) { return s.ready == jobs; });
  const size_t cap = h_->ordered() ? 2 : 2 + kMaxShards - 1;
  auto held = MustReserve(q(), queue, 10);
  EXPECT_GE(held.size(), 2u);
  EXPECT_LE(held.size(), cap);
  if (h_->ordered()) {
    EXPECT_TRUE(MustReserve(q(), queue, 10).empty()) << "the cap is reached";
  }
  // A waiting reserve is held by the cap until a lease ends: an ack, then a nack to dead.
  auto waiting = ReserveWaiting(q(), queue, 20'000, 10);
  ASSERT_TRUE(q().Ack(queue, held[0].receipt).ok());
  auto after_ack = Await(waiting);
  ASSERT_TRUE(after_ack.ok()) << after_ack.status().ToString();
  ASSERT_GE(after_ack->size(), 1u);
  if (h_->ordered()) {
    EXPECT_EQ(after_ack->size(), 1u) << "one lease ended: one more";
  }
  auto waiting_again = ReserveWaiting(q(), queue, 20'000, 10);
  auto dead = q().Nack(queue, {held[1].receipt, std::nullopt, "no", true});
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  auto after_nack = Await(waiting_again);
  ASSERT_TRUE(after_nack.ok());
  EXPECT_GE(after_nack->size(), 1u);
  EXPECT_LE(MustStats(q(), queue).reserved, static_cast<int64_t>(cap));
}

TEST_P(QueueConformance, AWaitingReserveHeldByTheRateIsAnsweredWhenATokenComes) {
  const std::string queue = QueueName();
  ASSERT_TRUE(q().SetConfig(queue, Limited(1, 1, 0)).ok());
  // Enough jobs that each shard of a sharded queue (a token each at first) has some left.
  const int jobs = h_->ordered() ? 3 : 40;
  Fill(q(), queue, jobs);
  (void)StatsWhen(*h_, queue, [&](const QueueStats& s) { return s.ready == jobs; });
  // Before the reserve that takes the token: the next comes a second after the server took it,
  // which is after this (a time read after its answer would count the answer's way back).
  const auto start = std::chrono::steady_clock::now();
  auto first = MustReserve(q(), queue, 10);
  ASSERT_GE(first.size(), 1u);
  auto waiting = ReserveWaiting(q(), queue, 20'000, 10);
  if (h_->exact_time()) h_->Advance(1000);  // the next token (a real clock brings it itself)
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_GE(got->size(), 1u) << "answered by the token, not by the end of the wait";
  if (!h_->exact_time() && h_->ordered()) {
    // The token was a second away (allow the clocks' rounding).
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  }
  if (h_->ordered()) {
    EXPECT_EQ(got->size(), 1u);
  }
}

TEST_P(QueueConformance, TimeHeldBackByALimitIsNotLateness) {
  const std::string queue = QueueName();
  // A sharded queue holds a share of the rate per shard: 4 a second there is 1 a second a shard
  // (up to 4), so two jobs on one shard do not wait four seconds for the second token.
  ASSERT_TRUE(q().SetConfig(queue, Limited(h_->ordered() ? 1 : kMaxShards, 1, 0)).ok());
  Fill(q(), queue, 3);
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 3; });
  size_t got = MustReserve(q(), queue, 10).size();  // one now; the limit holds the others back
  for (int i = 0; i < 40 && got < 3; ++i) {
    h_->Advance(h_->exact_time() ? 1000 : 250);
    got += MustReserve(q(), queue, 10).size();
  }
  ASSERT_EQ(got, 3u);
  const QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.lateness.count, 3u) << "every first delivery has a lateness sample";
  if (h_->ordered()) {
    EXPECT_EQ(s.limit_wait.count, 2u) << "two jobs waited for the limit";
    EXPECT_GE(s.limit_wait.max_ms, 900.0) << "the last one waited for two tokens";
  }
  // Held back for a second or more, late by (almost) nothing: jobs wait for the limit, not for
  // delayq. A real clock allows for the calls themselves (slow under the sanitizers).
  EXPECT_LE(s.lateness.max_ms, h_->exact_time() ? 0.0 : 800.0);
}

TEST_P(QueueConformance, ManyThreadsUnderACapNeverLeaseMoreThanIt) {
  const std::string queue = QueueName();
  constexpr int kJobs = 60;
  ASSERT_TRUE(q().SetConfig(queue, Limited(0, 0, 3)).ok());
  Fill(q(), queue, kJobs);
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == kJobs; });
  const int64_t cap = h_->ordered() ? 3 : 3 + kMaxShards - 1;
  std::atomic<int> acked{0}, wrong{0};
  std::mutex why_mu;
  std::vector<std::string> why;  // the first wrong answers, for the failure message
  auto note = [&](const std::string& what) {
    ++wrong;
    std::lock_guard lock(why_mu);
    if (why.size() < 5) why.push_back(what);
  };
  std::atomic<bool> done{false};
  std::atomic<int64_t> most_reserved{0};
  std::thread watcher([&] {  // the store's own count of leases, sampled all along
    while (!done) {
      auto s = q().Stats(queue);
      if (s.ok()) most_reserved = std::max<int64_t>(most_reserved, s->reserved);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> consumers;
  for (int t = 0; t < 4; ++t) {
    consumers.emplace_back([&, t] {
      for (int round = 0; round < 400 && acked < kJobs; ++round) {
        // On a manual clock a waiting reserve would wait for time nobody moves: ask without.
        auto got = q().Reserve(queue, ReserveRequest{10, h_->exact_time() ? 0 : 200, std::nullopt});
        if (!got.ok()) {
          note("reserve: " + got.status().ToString());
          continue;
        }
        if (static_cast<int64_t>(got->size()) > cap) note("a reserve of " + std::to_string(got->size()));
        // Interleaved failures: a forged receipt changes nothing.
        if (auto forged = q().Ack(queue, "not-a-receipt"); forged.code() != Code::kInvalidArgument) {
          note("forged: " + forged.ToString());
        }
        for (const auto& d : *got) {
          if (t == 0 && round % 3 == 0) {  // some go back to the queue for someone else
            auto nacked = q().Nack(queue, {d.receipt, 0, "again", false});
            if (!nacked.ok()) note("nack: " + nacked.status().ToString());
            continue;
          }
          if (auto s = q().Ack(queue, d.receipt); s.ok()) {
            ++acked;
          } else {
            note("ack: " + s.ToString());
          }
        }
      }
    });
  }
  for (auto& c : consumers) c.join();
  done = true;
  watcher.join();
  EXPECT_EQ(acked.load(), kJobs);
  EXPECT_EQ(wrong.load(), 0) << ::testing::PrintToString(why);
  EXPECT_LE(most_reserved.load(), cap);
  EXPECT_EQ(MustStats(q(), queue).reserved, 0);
}

TEST_P(QueueConformance, BadLimitsAreRefusedAndChangeNothing) {
  const std::string queue = QueueName();
  const QueueConfig good = Limited(5, 10, 4);
  ASSERT_TRUE(q().SetConfig(queue, good).ok());
  for (const QueueConfig& bad : {Limited(-1, 0, 0), Limited(1e7, 0, 0), Limited(1, -1, 0), Limited(1, 2'000'000, 0),
                                 Limited(0, 0, -5), Limited(0, 0, 1'000'001)}) {
    auto s = q().SetConfig(queue, bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad.rate_per_s << " " << bad.burst << " " << bad.max_reserved;
    EXPECT_TRUE(s.message().find("rate_per_s") != std::string::npos || s.message().find("burst") != std::string::npos ||
                s.message().find("max_reserved") != std::string::npos)
        << s.message();
  }
  auto stored = q().GetConfig(queue);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, good);
  h_->Restart();
  stored = q().GetConfig(queue);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(*stored, good) << "the limits survive a restart";
}

}  // namespace delayq::testing

namespace delayq::testing {
namespace {

// A reserve waiting behind a limit is answered as soon as a config change lifts it (found by a
// hostile user: on the embedded store it waited out its whole wait_ms, 5 s, while a new reserve
// got a job at once).
void ExpectALiftedLimitWakesTheWaiter(QueueHarness& h, const QueueConfig& tight, const QueueConfig& loose,
                                      bool grouped) {
  const std::string queue = QueueName();
  ASSERT_TRUE(h.queue().SetConfig(queue, tight).ok());
  for (int i = 0; i < kJobsForEveryShard; ++i) {
    EnqueueRequest j = Job("held");
    if (grouped) j.group = "tenant";
    MustEnqueue(h.queue(), queue, j);
  }
  (void)StatsWhen(h, queue, [](const QueueStats& s) { return s.ready == kJobsForEveryShard; });
  const auto held = TakeUntilHeldBack(h.queue(), queue);
  ASSERT_FALSE(held.empty());
  ASSERT_LT(held.size(), static_cast<size_t>(kJobsForEveryShard)) << "the tight limit holds jobs back";
  auto waiting = ReserveWaiting(h.queue(), queue, 60'000);  // far longer than the test: answered by the change
  ASSERT_EQ(waiting.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  ASSERT_TRUE(h.queue().SetConfig(queue, loose).ok());
  // A raised rate earns its next token 1 ms on (a bucket keeps what it holds; it is not refilled
  // by a config change): far less than the old rate's next token, an hour away.
  h.Advance(10);
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 1u) << "the waiter is served when the limit is lifted, not when its wait ends";
}

}  // namespace

TEST_P(QueueConformance, RaisingMaxReservedWakesAWaitingReserve) {
  QueueConfig tight, loose;
  tight.max_reserved = 1;
  loose.max_reserved = 1000;
  ExpectALiftedLimitWakesTheWaiter(*h_, tight, loose, false);
}

TEST_P(QueueConformance, RaisingTheRateWakesAWaitingReserve) {
  QueueConfig tight, loose;
  tight.rate_per_s = 1.0 / 3600;  // the next token an hour away
  tight.burst = 1;
  loose.rate_per_s = 1000;
  loose.burst = 1000;
  ExpectALiftedLimitWakesTheWaiter(*h_, tight, loose, false);
}

TEST_P(QueueConformance, RaisingGroupMaxReservedWakesAWaitingReserve) {
  QueueConfig tight, loose;
  tight.group_max_reserved = 1;
  loose.group_max_reserved = 1000;
  ExpectALiftedLimitWakesTheWaiter(*h_, tight, loose, true);
}

TEST_P(QueueConformance, RemovingEveryLimitWakesAWaitingReserve) {
  QueueConfig tight;
  tight.max_reserved = 1;
  tight.rate_per_s = 1.0 / 3600;
  tight.burst = 1;
  ExpectALiftedLimitWakesTheWaiter(*h_, tight, QueueConfig{}, false);
}

}  // namespace delayq::testing

namespace delayq::testing {

namespace {

// The deliveries `held` are kept a while, then acked, and the next job is taken: it waited for a
// limit (its group's cap), and nothing was late but by the setup's calls (`setup_ms`, on a real
// clock), never by the wait.
void ExpectTheWaitWasForALimit(QueueHarness& h, const std::string& queue, const std::vector<Delivery>& held,
                               double setup_ms) {
  const int64_t wait_ms = h.exact_time() ? 5'000 : 1'500;
  h.Advance(wait_ms);
  for (const Delivery& d : held) ASSERT_TRUE(h.queue().Ack(queue, d.receipt).ok());
  auto next = MustReserve(h.queue(), queue, 1);
  ASSERT_EQ(next.size(), 1u);
  const QueueStats s = MustStats(h.queue(), queue);
  EXPECT_GE(s.limit_wait.count, 1u) << "the job held back by its group's cap waited for a limit";
  EXPECT_GE(s.limit_wait.max_ms, wait_ms * 0.8);
  EXPECT_LE(s.lateness.max_ms, h.exact_time() ? 0.0 : setup_ms + wait_ms * 0.5);
}

}  // namespace

// One rule for every limit (issue 34): time a job waits because its group is at
// group_max_reserved is limit_wait, as for the queue's own limits, not lateness.
TEST_P(QueueConformance, TimeHeldBackByAGroupCapIsNotLateness) {
  const std::string queue = QueueName();
  QueueConfig c;
  c.group_max_reserved = 1;
  ASSERT_TRUE(q().SetConfig(queue, c).ok());
  std::vector<EnqueueRequest> jobs(kJobsForEveryShard, Job("tenant"));
  for (EnqueueRequest& j : jobs) j.group = "tenant-a";
  // The first jobs are late by the time these calls take until they are taken (on a real clock,
  // more on a slow machine): measured, and allowed for below.
  const auto setup_start = std::chrono::steady_clock::now();
  ASSERT_TRUE(q().EnqueueBatch(queue, jobs).ok());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == kJobsForEveryShard; });
  auto held = TakeUntilHeldBack(q(), queue);  // one per shard; the cap holds the rest back
  const auto setup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - setup_start);
  ASSERT_FALSE(held.empty());
  ExpectTheWaitWasForALimit(*h_, queue, held, setup_ms.count());
}

// The same when the cap is reached inside one reserve: a reserve of 10 serves each of two groups
// once, and both are then at their caps. (The Redis script once dropped, at the end of such a
// reserve, the time it had just noted, and the wait counted as lateness.)
TEST_P(QueueConformance, AGroupCappedInsideAReserveWaitsForALimitNotLate) {
  const std::string queue = QueueName();
  QueueConfig c;
  c.group_max_reserved = 1;
  ASSERT_TRUE(q().SetConfig(queue, c).ok());
  std::vector<EnqueueRequest> jobs(2 * kJobsForEveryShard, Job("tenant"));
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].group = i % 2 ? "tenant-a" : "tenant-b";
  const auto setup_start = std::chrono::steady_clock::now();
  ASSERT_TRUE(q().EnqueueBatch(queue, jobs).ok());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 2 * kJobsForEveryShard; });
  // One reserve, and no other before the wait ends: one that found the groups full would note
  // the time again.
  std::vector<Delivery> held = MustReserve(q(), queue, 10, 3'600'000);
  const auto setup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - setup_start);
  ASSERT_GE(held.size(), 2u);
  ExpectTheWaitWasForALimit(*h_, queue, held, setup_ms.count());
}

}  // namespace delayq::testing
