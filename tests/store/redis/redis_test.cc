// The Redis store: the conformance suite unchanged (one node, a sharded queue, a three-master
// cluster), then what only Redis has: several servers sharing one Redis, kill -9 of a server
// holding jobs, a Redis restart with AOF, and `delayq doctor`.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "integration/server_fixture.h"
#include "store/redis/redis_fixture.h"
#include "store/redis/redis_queue.h"
#include "support/holding_proxy.h"
#include "support/outcome_wait.h"

namespace delayq::testing {
namespace {

RedisServer& SharedRedis() {
  static RedisServer server;
  return server;
}

RedisCluster& SharedCluster() {
  static RedisCluster cluster;
  return cluster;
}

// Redis as a managed one is reached: TLS with a private CA, and a password (issue 27).
std::string SharedTlsRedisUrl() {
  static TestCerts certs;
  static std::unique_ptr<RedisServer> server = [] {
    std::vector<std::string> args = certs.RedisArgs(false);
    args.insert(args.end(), {"--requirepass", "conformance-pw"});
    return std::make_unique<RedisServer>(args, "", /*tls=*/true);
  }();
  return "rediss://:conformance-pw@127.0.0.1:" + std::to_string(server->port()) + "?ca=" + certs.ca();
}

class RedisHarness : public QueueHarness {
 public:
  RedisHarness(std::string url, int shards) : url_(std::move(url)), shards_(shards) { Restart(); }
  // Everything is in Redis: a new store (another process, as far as Redis can tell) on it.
  void Restart() override {
    queue_.reset();
    redis::RedisQueueOptions o;
    o.url = url_;
    o.shards = shards_;
    // Far longer than any test step: every wake-up the suite waits for must come from the event
    // that causes it (a wake message, an ack, a config change), not from the once-a-second probe
    // that makes up for lost messages (a waiter served only by it was a bug the suite missed).
    o.safety_interval_ms = 60'000;
    auto q = redis::ScheduledRedisQueue::Open(o);
    if (!q.ok()) throw std::runtime_error(q.status().ToString());
    queue_ = std::move(*q);
  }
  Queue& queue() override { return *queue_; }
  int64_t NowMs() override { return SystemClock().NowMs(); }
  void Advance(int64_t ms) override { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
  bool exact_time() const override { return false; }
  bool ordered() const override { return shards_ == 1; }
  bool ready_in_arrival_order() const override { return true; }

 private:
  std::string url_;
  int shards_;
  std::unique_ptr<redis::ScheduledRedisQueue> queue_;
};

INSTANTIATE_TEST_SUITE_P(
    Redis, QueueConformance,
    ::testing::Values(HarnessFactory{"single", [] { return std::make_unique<RedisHarness>(SharedRedis().url(), 1); }},
                      HarnessFactory{"sharded", [] { return std::make_unique<RedisHarness>(SharedRedis().url(), 4); }},
                      HarnessFactory{"tls_auth", [] { return std::make_unique<RedisHarness>(SharedTlsRedisUrl(), 1); }},
                      HarnessFactory{"cluster",
                                     [] { return std::make_unique<RedisHarness>(SharedCluster().url_text(), 1); }},
                      HarnessFactory{"cluster_sharded",
                                     [] { return std::make_unique<RedisHarness>(SharedCluster().url_text(), 3); }}),
    HarnessName);

EnqueueRequest Job(std::string payload, std::optional<int64_t> delay_ms = std::nullopt) {
  EnqueueRequest r;
  r.payload = std::move(payload);
  r.when.delay_ms = delay_ms;
  return r;
}

// Receipts are signed with a secret kept in Redis: a receipt issued by one server is good on
// every other server sharing that Redis, and a second store opened later reads the same secret.
TEST(RedisStore, AReceiptFromOneServerIsGoodOnAnother) {
  RedisServer redis;
  redis::RedisQueueOptions o;
  o.url = redis.url();
  auto a = redis::RedisQueue::Open(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = redis::RedisQueue::Open(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*a)->Enqueue("signed", Job(std::to_string(i))).ok());
  auto got = (*a)->Reserve("signed", {.max = 3});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 3u);
  EXPECT_TRUE((*b)->Ack("signed", (*got)[0].receipt).ok());
  EXPECT_TRUE((*b)->Touch("signed", (*got)[1].receipt, std::nullopt).ok());
  NackRequest n;
  n.receipt = (*got)[2].receipt;
  EXPECT_TRUE((*b)->Nack("signed", n).ok());
  std::string tampered = (*got)[1].receipt;
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  EXPECT_EQ((*b)->Ack("signed", tampered).code(), Code::kInvalidArgument);
}

// Waits on one server, the jobs' ends on another: each wait is answered by the wake channel's
// announcement, long before its 60 s end; with the waiting server's subscription killed just
// before an ack (the announcement lost), its waits are read again once it is subscribed again.
TEST(RedisStore, AWaitOnOneServerIsAnsweredByAnEndOnAnotherEvenOverALostSubscription) {
  RedisServer redis;
  redis::RedisQueueOptions o;
  o.url = redis.url();
  auto a = redis::RedisQueue::Open(o), b = redis::RedisQueue::Open(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EnqueueRequest once = Job("dies");
  once.max_attempts = 1;
  const std::string acked = (*b)->Enqueue("w", Job("acked"))->id, dies = (*b)->Enqueue("w", once)->id;
  const std::string later = (*b)->Enqueue("w", Job("later", 3'600'000))->id;
  const std::string lost = (*b)->Enqueue("w", Job("lost"))->id;
  const auto start = std::chrono::steady_clock::now();
  auto f_acked = WaitOn(**a, "w", JobRef::ById(acked)), f_dies = WaitOn(**a, "w", JobRef::ById(dies));
  auto f_later = WaitOn(**a, "w", JobRef::ById(later));
  auto got = (*b)->Reserve("w", {.max = 3});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 3u);
  std::string lost_receipt;
  for (const auto& d : *got) {
    if (d.id == acked) {
      ASSERT_TRUE((*b)->Ack("w", AckRequest{d.receipt, "[1]"}).ok());
    } else if (d.id == dies) {
      ASSERT_TRUE((*b)->Nack("w", NackRequest{d.receipt, 0, "no", false}).ok());
    } else {
      lost_receipt = d.receipt;
    }
  }
  ASSERT_TRUE((*b)->Cancel("w", JobRef::ById(later)).ok());
  auto done = AwaitOutcome(f_acked), dead = AwaitOutcome(f_dies), cancelled = AwaitOutcome(f_later);
  ASSERT_TRUE(done.ok() && dead.ok() && cancelled.ok());
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(done->result, "[1]");
  EXPECT_EQ(dead->state, JobState::kDead);
  EXPECT_EQ(cancelled->state, JobState::kCancelled);

  auto f_lost = WaitOn(**a, "w", JobRef::ById(lost));
  ASSERT_TRUE((*b)->client().Call("", {"CLIENT", "KILL", "TYPE", "pubsub"}).ok());
  ASSERT_TRUE((*b)->Ack("w", AckRequest{lost_receipt, "2"}).ok());
  auto after = AwaitOutcome(f_lost);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kCompleted);
  EXPECT_EQ(after->result, "2");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30))
      << "woken by the ends, not by the waits' end";
}

// What is published between a server sending PSUBSCRIBE and Redis taking it reaches no one: the
// server reads again what it may have missed only once Redis confirms the subscription (it did so
// right after sending, and a CI run had a wait go unanswered). A proxy holds the PSUBSCRIBE while
// another server acks the job waited for, cancels another waited for (gone: only the catch-up's
// read can answer it, cancelled) and enqueues one a reserve waits for.
TEST(RedisStore, WhatIsPublishedBeforeTheSubscriptionIsTakenIsReadAfterIt) {
  RedisServer redis;
  HoldingProxy proxy(redis.port(), "PSUBSCRIBE");
  redis::RedisQueueOptions o;
  o.url = redis.url();
  o.safety_interval_ms = 60'000;  // only a wake message or the catch-up answers
  auto b = redis::RedisQueue::Open(o);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->Enqueue("w", Job("x")).ok());
  auto reserved = (*b)->Reserve("w", {});
  ASSERT_TRUE(reserved.ok() && reserved->size() == 1u);
  const Delivery job = (*reserved)[0];
  o.url = "redis://127.0.0.1:" + std::to_string(proxy.port());
  auto a = redis::RedisQueue::Open(o);
  ASSERT_TRUE(a.ok());
  proxy.AwaitHeld(1);
  auto waited = WaitOn(**a, "w", JobRef::ById(job.id));
  auto cancelled_job = (*b)->Enqueue("w", Job("z", 3'600'000));
  ASSERT_TRUE(cancelled_job.ok());
  auto cancelled = WaitOn(**a, "w", JobRef::ById(cancelled_job->id));
  auto reserve = ReserveWaiting(**a, "w", 60'000);
  ASSERT_TRUE((*b)->Ack("w", AckRequest{job.receipt, "7"}).ok());
  ASSERT_TRUE((*b)->Cancel("w", JobRef::ById(cancelled_job->id)).ok());  // gone: only a recheck can tell
  auto later = (*b)->Enqueue("w", Job("y"));
  ASSERT_TRUE(later.ok());
  proxy.Release();
  auto done = AwaitOutcome(waited);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(done->result, "7");
  auto gone = AwaitOutcome(cancelled);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(gone->state, JobState::kCancelled);
  auto got = Await(reserve);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, later->id);
}

// The store on `redis`, with the options `set` changes.
std::unique_ptr<redis::RedisQueue> OpenOn(RedisServer& redis,
                                          const std::function<void(redis::RedisQueueOptions&)>& set) {
  redis::RedisQueueOptions o;
  o.url = redis.url();
  set(o);
  auto q = redis::RedisQueue::Open(o);
  if (!q.ok()) ADD_FAILURE() << q.status().ToString();
  return q.ok() ? std::move(*q) : nullptr;
}

TEST(RedisStore, TheQueueLimitHolds) {
  RedisServer redis;
  auto q = OpenOn(redis, [](auto& o) { o.max_queues = 3; });
  ASSERT_TRUE(q);
  ExpectTheQueueLimitHolds(*q);
  auto members = q->client().Call("dq:queues", {"SCARD", "dq:queues"});
  ASSERT_TRUE(members.ok());
  EXPECT_EQ(members->AsInt(), 3) << "a refused queue stayed in the registry";
}

// A key whose shard (CRC16 mod `shards`, docs/operations.md) is, or is not, `shard`.
std::string KeyOnShard(const std::string& stem, int shards, int shard, bool on) {
  for (int i = 0;; ++i) {
    std::string key = stem + std::to_string(i);
    if ((redis::Crc16(key) % shards == shard) == on) return key;
  }
}

// A batch spread over shards goes out whole (RedisClient::EvalAll): the part Redis refuses (it
// would replace a reserved job) is the answer, and the other shards' parts are stored, whatever
// their order (when the parts went one at a time, a refusal in the first left the rest unmade).
TEST(RedisStore, ABatchOverShardsRefusedInOnePartKeepsTheOtherParts) {
  RedisServer redis;
  auto store = OpenOn(redis, [](auto& o) { o.shards = 4; });
  ASSERT_TRUE(store);
  EnqueueRequest held = Job("held");
  held.key = KeyOnShard("held", 4, 0, true);  // the batch's first part
  ASSERT_TRUE(store->Enqueue("parts", held).ok());
  auto reserved = store->Reserve("parts", {});
  ASSERT_TRUE(reserved.ok() && reserved->size() == 1);

  std::vector<EnqueueRequest> batch;
  for (int i = 0; i < 6; ++i) {
    batch.push_back(Job("other"));
    batch.back().key = KeyOnShard("other" + std::to_string(i) + "-", 4, 0, false);
  }
  EnqueueRequest replace = held;
  replace.replace = true;
  batch.insert(batch.begin() + 2, replace);
  auto answer = store->EnqueueBatch("parts", batch);
  EXPECT_EQ(answer.code(), Code::kConflict) << answer.status().ToString();
  EXPECT_NE(answer.status().message().find("jobs[2]"), std::string::npos) << answer.status().message();
  EXPECT_NE(answer.status().message().find("the parts of 6 of the 7 jobs were stored"), std::string::npos)
      << "the error says what was stored: " << answer.status().message();
  for (const EnqueueRequest& r : batch) {
    if (r.key == held.key) continue;
    EXPECT_TRUE(store->Get("parts", JobRef::ByKey(r.key)).ok()) << r.key << "'s part was not stored";
  }
}

TEST(RedisStore, TwoServersOnOneRedisShareTheWork) {
  RedisServer redis;
  ServerProcess a({"--store", redis.url()});
  ServerProcess b({"--store", redis.url()});
  auto producer = a.NewClient();
  std::vector<EnqueueRequest> jobs;
  for (int i = 0; i < 400; ++i) jobs.push_back(Job(std::to_string(i), 300 + (i * 7) % 1500));
  for (size_t i = 0; i < jobs.size(); i += 100) {
    ASSERT_TRUE(producer->EnqueueBatch("shared", std::span(jobs).subspan(i, 100)).ok());
  }
  std::mutex mu;
  std::set<std::string> received, held;
  std::atomic<int> early{0}, doubled{0}, errors{0};
  std::vector<std::thread> consumers;
  for (int c = 0; c < 4; ++c) {
    consumers.emplace_back([&, c] {
      auto client = (c % 2 ? a : b).NewClient();
      while (true) {
        {
          std::lock_guard lock(mu);
          if (received.size() >= jobs.size()) return;
        }
        auto got = client->Reserve("shared", {.max = 10, .wait_ms = 1000, .lease_ms = 20'000});
        if (!got.ok()) {
          ++errors;
          continue;
        }
        const int64_t now = SystemClock().NowMs();
        for (auto& d : *got) {
          if (now < d.due_at_ms) ++early;
          {
            std::lock_guard lock(mu);
            if (!held.insert(d.id).second) ++doubled;  // two holders at once
            if (!received.insert(d.id).second) ++doubled;
          }
          if (!client->Ack("shared", d.receipt).ok()) ++errors;
          std::lock_guard lock(mu);
          held.erase(d.id);
        }
      }
    });
  }
  for (auto& t : consumers) t.join();
  EXPECT_EQ(received.size(), jobs.size());
  EXPECT_EQ(early.load(), 0);
  EXPECT_EQ(doubled.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

// Flow control across servers: two servers on one Redis, four consumers between them, a queue
// limited to 50 deliveries a second (burst 5). Together they never get more than the bucket
// allows. The run ends on a count (150 deliveries), not a clock, so a slow machine takes longer
// without failing; how close to the limit they come is printed (and measured by the benchmarks).
TEST(RedisStore, TwoServersOnOneRedisShareOneRateLimit) {
  RedisServer redis;
  ServerProcess a({"--store", redis.url()});
  ServerProcess b({"--store", redis.url()});
  auto admin = a.NewClient();
  QueueConfig c;
  c.rate_per_s = 50;
  c.burst = 5;
  ASSERT_TRUE(admin->SetConfig("limited", c).ok());
  // Another server learns a config change within a second (its cache of the config): wait for b.
  auto other = b.NewClient();
  for (int i = 0; i < 3000 && other->GetConfig("limited")->rate_per_s != 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a poll of b's view
  }
  ASSERT_EQ(other->GetConfig("limited")->rate_per_s, 50) << "server b never read the limit";
  std::vector<EnqueueRequest> jobs(500, Job("x"));
  ASSERT_TRUE(admin->EnqueueBatch("limited", jobs).ok());
  constexpr int64_t kWanted = 150;
  std::atomic<int64_t> delivered{0};
  std::atomic<int> errors{0};
  const auto start = std::chrono::steady_clock::now();
  const auto cap = start + std::chrono::seconds(60);
  std::vector<std::thread> consumers;
  for (int i = 0; i < 4; ++i) {
    consumers.emplace_back([&, i] {
      auto client = (i % 2 ? a : b).NewClient();
      while (delivered.load() < kWanted && std::chrono::steady_clock::now() < cap) {
        auto got = client->Reserve("limited", {.max = 10, .wait_ms = 200, .lease_ms = 60'000});
        if (!got.ok()) {
          ++errors;
          continue;
        }
        delivered += static_cast<int64_t>(got->size());
      }
    });
  }
  for (auto& t : consumers) t.join();
  const auto end = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(end - start).count();
  std::printf("two servers, limit 50/s burst 5: %lld deliveries in %.1f s (%.1f/s)\n",
              static_cast<long long>(delivered.load()), seconds, static_cast<double>(delivered.load()) / seconds);
  EXPECT_EQ(errors.load(), 0);
  ASSERT_GE(delivered.load(), kWanted) << "the servers handed out " << delivered.load() << " in 60 s";
  // Every delivery was handed out between `start` and `end`: the bucket allowed at most
  // burst + rate x elapsed of them (+2 for the token refilled while a script ran).
  EXPECT_LE(static_cast<double>(delivered.load()), 5 + 50 * seconds + 2) << "more than the bucket allows";
}

std::unique_ptr<redis::ScheduledRedisQueue> OpenScheduling(const std::string& url, int64_t lead_ms) {
  redis::RedisQueueOptions o;
  o.url = url;
  o.schedules.lead_ms = lead_ms;
  o.schedules.refresh_ms = 300;
  auto q = redis::ScheduledRedisQueue::Open(o);
  if (!q.ok()) throw std::runtime_error(q.status().ToString());
  return std::move(*q);
}

// Two servers on one Redis run the same schedule: every occurrence is one job, none is missed,
// whoever made it and whichever consumer takes it.
TEST(RedisStore, TwoServersOnOneRedisMakeOneJobPerOccurrence) {
  RedisServer redis;
  auto a = OpenScheduling(redis.url(), 1'500);
  auto b = OpenScheduling(redis.url(), 1'500);
  ScheduleSpec tick;
  tick.name = "tick";
  tick.every_ms = 1'000;
  ASSERT_TRUE(a->PutSchedule("shared", tick).ok());
  std::map<std::string, int> seen;
  // Until five occurrences are delivered (about five seconds), whatever the machine's speed; then
  // a second more, for a run made twice to show up.
  const auto cap = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto stop = cap;
  while (std::chrono::steady_clock::now() < stop) {
    if (seen.size() >= 5 && stop == cap) stop = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (auto* store : {a.get(), b.get()}) {
      auto got = store->Reserve("shared", {.max = 10, .wait_ms = 100, .lease_ms = 60'000});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (const auto& d : *got) {
        ++seen[d.key];
        ASSERT_TRUE(store->Ack("shared", d.receipt).ok());
      }
    }
  }
  ASSERT_GE(seen.size(), 5u) << "60 s made fewer than five runs";
  std::vector<int64_t> runs;
  for (const auto& [key, n] : seen) {
    EXPECT_EQ(n, 1) << key << " was delivered " << n << " times";
    runs.push_back(std::stoll(key.substr(key.rfind(':') + 1)));
  }
  std::sort(runs.begin(), runs.end());
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i] - runs[i - 1], 1'000) << "a gap before " << runs[i];
}

// Every server stopped for a few runs: the runs already made into jobs are delivered, and those
// missed follow each schedule's misfire rule when a server starts again.
TEST(RedisStore, MissedRunsFollowTheMisfireRuleWhenAServerStartsAgain) {
  RedisServer redis;
  auto a = OpenScheduling(redis.url(), 500);
  for (auto [name, misfire] : {std::pair{"skip", Misfire::kSkip}, std::pair{"all", Misfire::kRunAll}}) {
    ScheduleSpec s;
    s.name = name;
    s.every_ms = 1'000;
    s.misfire = misfire;
    ASSERT_TRUE(a->PutSchedule("missed", s).ok());
  }
  a->Close();
  const int64_t stopped = SystemClock().NowMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(4'500));  // the downtime itself
  auto b = OpenScheduling(redis.url(), 500);
  const int64_t started = SystemClock().NowMs();
  // The runs of the downtime: after those made ahead before the stop (within the lead and one
  // beyond), and before the new server started.
  std::vector<int64_t> downtime;
  for (int64_t at = (stopped + 1'500) / 1000 * 1000 + 1000; at + 1000 < started; at += 1000) downtime.push_back(at);
  ASSERT_GE(downtime.size(), 2u);
  std::map<std::string, std::set<int64_t>> runs;
  auto all_made = [&] {
    return std::all_of(downtime.begin(), downtime.end(), [&](int64_t at) { return runs["all"].contains(at); });
  };
  for (int i = 0; i < 3000 && !all_made(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a poll of the new server's runner (60 s at most)
    runs.clear();
    auto page = b->ListJobs("missed", ListRequest{JobState::kReady, 1000, {}});
    ASSERT_TRUE(page.ok());
    for (const auto& j : page->jobs) {
      runs[j.headers.at("delayq-schedule")].insert(std::stoll(j.key.substr(j.key.rfind(':') + 1)));
    }
  }
  EXPECT_TRUE(all_made()) << "run_all makes every missed run";
  for (int64_t at : downtime) EXPECT_FALSE(runs["skip"].contains(at)) << "skip makes none of them: " << at;
  b->Close();
}

TEST(RedisStore, KillNineOfAServerHoldingJobsRedeliversAfterTheLease) {
  RedisServer redis;
  auto survivor = std::make_unique<ServerProcess>(std::vector<std::string>{"--store", redis.url()});
  ServerProcess doomed({"--store", redis.url()});
  auto c = doomed.NewClient();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(c->Enqueue("crash", Job(std::to_string(i))).ok());
  auto held = c->Reserve("crash", {.max = 20, .wait_ms = 0, .lease_ms = 1500});
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->size(), 20u);
  EXPECT_EQ(doomed.Kill(), 128 + SIGKILL);
  auto other = survivor->NewClient();
  std::set<std::string> again;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (again.size() < 20 && std::chrono::steady_clock::now() < deadline) {
    auto got = other->Reserve("crash", {.max = 20, .wait_ms = 2000});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (auto& d : *got) {
      EXPECT_EQ(d.attempt, 2) << "the pending list counts the second delivery";
      again.insert(d.id);
    }
  }
  EXPECT_EQ(again.size(), 20u);
}

// A lease that runs out on the last attempt sends the job dead, and one of the servers sharing
// the Redis (the one whose reap did it) logs it as a warning, as the embedded store does.
TEST(RedisStore, ALeaseRunOutOnTheLastAttemptIsLoggedOnceAsADeath) {
  RedisServer redis;
  ServerProcess a({"--store", redis.url()});
  ServerProcess b({"--store", redis.url()});
  auto c = a.NewClient();
  EnqueueRequest r = Job("x");
  r.max_attempts = 1;
  auto e = c->Enqueue("mortal", r);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto held = c->Reserve("mortal", {.max = 1, .wait_ms = 0, .lease_ms = 1000});
  ASSERT_TRUE(held.ok() && held->size() == 1);
  // The reap runs at the lease deadline; the dead listing shows when it has.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    auto dead = c->ListDead("mortal", 1);
    ASSERT_TRUE(dead.ok()) << dead.status().ToString();
    if (!dead->empty()) break;
    auto none = c->Reserve("mortal", {.max = 1, .wait_ms = 500});  // a wait on Redis, not a sleep
    ASSERT_TRUE(none.ok() && none->empty());
  }
  ASSERT_EQ(a.Terminate(), 0);
  ASSERT_EQ(b.Terminate(), 0);
  const std::string want = "job " + e->id + " of queue \"mortal\" went dead after 1 attempt: lease expired";
  auto count = [&](const std::string& log) {
    int n = 0;
    for (size_t at = log.find(want); at != std::string::npos; at = log.find(want, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(a.log()) + count(b.log()), 1) << a.log() << "\n---\n" << b.log();
}

// A config read (the scheduler reads every known queue's) that a SetConfig overtook must not
// cache what it read: the reserve then used the old lease (seen once in the conformance suite
// on a loaded fresh machine). The hook makes the SetConfig land inside the read.
TEST(RedisStore, ConfigWrittenDuringAConfigReadIsNotUndoneByIt) {
  const std::string queue = "config-race";
  QueueConfig old_config, new_config;
  old_config.lease_ms = 3000;
  new_config.lease_ms = 2000;
  new_config.max_attempts = 3;
  {
    redis::RedisQueueOptions o;
    o.url = SharedRedis().url();
    auto writer = redis::RedisQueue::Open(o);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->SetConfig(queue, old_config).ok());
  }
  // The hook fires in the first read of the queue's config, on whichever thread makes it (the
  // test's GetConfig or the scheduler's own read; which comes first depends on load).
  std::atomic<redis::RedisQueue*> store{nullptr};
  std::atomic<bool> fired{false}, written{false};
  redis::RedisQueueOptions o;
  o.url = SharedRedis().url();
  o.after_config_read_for_test = [&](const std::string& q) {
    if (q != queue || fired.exchange(true)) return;
    store.wait(nullptr);  // Open may still be running on the test thread
    EXPECT_TRUE(store.load()->SetConfig(queue, new_config).ok());
    written = true;
    written.notify_all();
  };
  auto q = redis::RedisQueue::Open(o);
  ASSERT_TRUE(q.ok());
  store = q->get();
  store.notify_all();
  auto got = (*q)->GetConfig(queue);  // reads old_config, or new_config if the scheduler's read fired
  ASSERT_TRUE(got.ok());
  written.wait(false);
  EXPECT_EQ((*q)->GetConfig(queue).value(), new_config) << "a read overtaken by the write cached what it read";
}

// The scheduler's answers say what Redis held when its script ran. A lease taken (or a retry
// announced) between that and the answer being taken in must still wake it: the answer used to
// overwrite it, and the lease ran out unseen until the next safety probe (a loaded machine
// showed it: a retry came 25 s late in NackBacksOffExponentially, whose Redis probes once a
// minute).
TEST(RedisStore, ALeaseTakenWhileAPromoteAnswersIsStillReapedOnTime) {
  const std::string queue = "answer-race";
  std::atomic<redis::RedisQueue*> store{nullptr};
  std::atomic<bool> armed{false};
  std::mutex mu;
  std::condition_variable cv;
  bool fired = false;
  size_t taken = 0;
  redis::RedisQueueOptions o;
  o.url = SharedRedis().url();
  o.safety_interval_ms = 60'000;  // nothing but the scheduler's own deadlines wakes it
  // Runs in the scheduler between the promote script and the use of its answer: the 1 s lease
  // taken here is noted while the answer (no lease then) is on its way.
  o.after_promote_for_test = [&](const std::string& name) {
    if (name != queue || !armed.load()) return;
    auto got = store.load()->Reserve(queue, {.max = 1, .wait_ms = 0, .lease_ms = 1000});
    if (!got.ok() || got->empty()) return;
    std::lock_guard lock(mu);
    fired = true;
    taken = got->size();
    armed = false;
    cv.notify_all();
  };
  auto q = redis::RedisQueue::Open(o);
  ASSERT_TRUE(q.ok());
  store = q->get();
  armed = true;
  ASSERT_TRUE((*q)->Enqueue(queue, Job("trigger", 300)).ok());
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return fired; })) << "no promote ran";
    ASSERT_EQ(taken, 1u);
  }
  // Reaped when the 1 s lease runs out; the next safety probe would be a minute away.
  auto again = (*q)->Reserve(queue, {.max = 1, .wait_ms = 20'000, .lease_ms = 60'000});
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u) << "the 1 s lease was not reaped within 20 s";
  EXPECT_EQ((*again)[0].attempt, 2);
}

TEST(RedisStore, RedisRestartWithAofKeepsAcknowledgedEnqueues) {
  TempDir dir;
  RedisServer redis({"--appendonly", "yes", "--appendfsync", "always"}, dir.path());
  std::vector<std::string> ids;
  {
    redis::RedisQueueOptions o;
    o.url = redis.url();
    auto q = redis::RedisQueue::Open(o);
    ASSERT_TRUE(q.ok());
    for (int i = 0; i < 200; ++i) ids.push_back((*q)->Enqueue("aof", Job(std::to_string(i), 3'600'000))->id);
  }
  EXPECT_EQ(redis.Kill(), 128 + SIGKILL);
  redis.Restart();
  redis::RedisQueueOptions o;
  o.url = redis.url();
  auto q = redis::RedisQueue::Open(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  for (const auto& id : ids) EXPECT_TRUE((*q)->Get("aof", JobRef::ById(id)).ok()) << id;
  EXPECT_EQ((*q)->Stats("aof")->scheduled, 200);
}

TEST(RedisStore, UnreachableRedisIsAClearUnavailable) {
  redis::RedisQueueOptions o;
  o.url = "redis://127.0.0.1:1";
  auto q = redis::RedisQueue::Open(o);
  EXPECT_EQ(q.code(), Code::kUnavailable);
  EXPECT_NE(q.status().message().find("cannot reach Redis at 127.0.0.1:1"), std::string::npos) << q.status().message();
  o.url = "http://nope";
  EXPECT_EQ(redis::RedisQueue::Open(o).code(), Code::kInvalidArgument);

  RedisServer redis;
  o.url = redis.url();
  auto live = redis::RedisQueue::Open(o);
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE((*live)->Enqueue("down", Job("1")).ok());
  redis.Kill();
  auto e = (*live)->Enqueue("down", Job("2"));
  EXPECT_EQ(e.code(), Code::kUnavailable) << e.status().ToString();
  redis.Restart();
  EXPECT_TRUE((*live)->Enqueue("down", Job("3")).ok()) << "reconnects once Redis is back";
}

// After Redis restarts, the pooled connections to the old process are dead: the first request
// must not be sent on one of them (it failed with "Server closed the connection" although Redis
// was up; seen under ThreadSanitizer, where the background threads had not yet used them up).
TEST(RedisClientTest, ConnectionsRedisClosedWhileIdleAreNotUsed) {
  RedisServer redis;
  auto url = redis::RedisUrl::Parse(redis.url());
  ASSERT_TRUE(url.ok());
  auto client = redis::RedisClient::Connect(*url);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Call("", {"PING"}).ok());
  redis.Kill();
  redis.Restart();
  auto pong = (*client)->Call("", {"PING"});
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->str, "PONG");
}

// RedisClient::EvalAll counts each key's runs and answers its key; "refuse" is the script's own
// error, an answer like any other (never run again).
const redis::Script kCountAndAnswer{
    "count_and_answer",
    "redis.call('INCR', KEYS[1]) if ARGV[1] == 'refuse' then return redis.error_reply('refused ' .. KEYS[1]) end "
    "return KEYS[1] .. '=' .. ARGV[1]"};

// One EvalAll over `keys` (the second call refused by the script): each answered in order, each
// run exactly once (`round` runs per key so far).
void ExpectEachAnsweredInOrderAndRunOnce(redis::RedisClient& c, const std::vector<std::string>& keys, int round) {
  std::vector<redis::RedisClient::EvalCall> calls;
  for (size_t i = 0; i < keys.size(); ++i) calls.push_back({{keys[i]}, {i == 1 ? "refuse" : std::to_string(i)}});
  auto out = c.EvalAll(kCountAndAnswer, calls);
  ASSERT_EQ(out.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(out[i].ok()) << keys[i] << ": " << out[i].status().ToString();
    if (i == 1) {
      EXPECT_TRUE(out[i]->is_error());
      EXPECT_EQ(out[i]->str, "refused " + keys[i]);
    } else {
      EXPECT_EQ(out[i]->str, keys[i] + "=" + std::to_string(i));
    }
    auto runs = c.Call(keys[i], {"GET", keys[i]});
    ASSERT_TRUE(runs.ok());
    EXPECT_EQ(runs->AsInt(), round) << keys[i] << " was not run exactly once in round " << round;
  }
}

// A sharded queue's parts go out together (EvalAll): the answers come in the calls' order, and a
// pipeline Redis refused whole (the scripts flushed: NOSCRIPT) runs each call again, once; down,
// each call is unavailable.
TEST(RedisClientTest, EvalAllAnswersEachCallInOrderAndRunsEachOnce) {
  RedisServer redis;
  auto url = redis::RedisUrl::Parse(redis.url());
  ASSERT_TRUE(url.ok());
  auto client = redis::RedisClient::Connect(*url);
  ASSERT_TRUE(client.ok());
  redis::RedisClient& c = **client;
  const std::vector<std::string> keys = {"{q#0}runs", "{q#1}runs", "{q#2}runs", "{q#3}runs"};
  ExpectEachAnsweredInOrderAndRunOnce(c, keys, 1);  // loads the script on the way
  ExpectEachAnsweredInOrderAndRunOnce(c, keys, 2);  // pipelined
  ASSERT_TRUE(c.Call("", {"SCRIPT", "FLUSH"}).ok());
  ExpectEachAnsweredInOrderAndRunOnce(c, keys, 3);
  redis.Kill();
  for (const auto& r : c.EvalAll(kCountAndAnswer, {{{keys[0]}, {"0"}}, {{keys[2]}, {"2"}}})) {
    EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  }
}

// Over a cluster the parts go to their masters side by side; masters whose script cache was
// flushed answer NOSCRIPT, and those calls run again on their own.
TEST(RedisClientTest, EvalAllOverAClustersMastersRunsEachCallOnce) {
  RedisCluster cluster;
  auto url = redis::RedisUrl::Parse(cluster.url_text());
  ASSERT_TRUE(url.ok());
  auto client = redis::RedisClient::Connect(*url);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  redis::RedisClient& c = **client;
  std::vector<std::string> keys;
  for (const char* tag : {"a", "b", "c", "d", "e", "f", "g", "h"}) keys.push_back(std::string("{") + tag + "}runs");
  ExpectEachAnsweredInOrderAndRunOnce(c, keys, 1);
  ExpectEachAnsweredInOrderAndRunOnce(c, keys, 2);
  ASSERT_TRUE(c.CallAll({"SCRIPT", "FLUSH"}).ok());
  ExpectEachAnsweredInOrderAndRunOnce(c, keys, 3);
}

// A command whose reply did not come in time may have run: it is not sent again, though the
// cluster's slots could be read again (a failover?). It was: a slow script was run twice, an
// enqueue made a job twice. Here the script counts its runs and outlasts the client's timeout.
TEST(RedisClientTest, ACommandThatMayHaveRunIsNotSentAgain) {
  RedisCluster cluster;
  auto url = redis::RedisUrl::Parse(cluster.url_text());
  ASSERT_TRUE(url.ok());
  auto client = redis::RedisClient::Connect(*url, /*timeout_ms=*/200);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const redis::Script slow{"count_then_outlast_the_timeout",
                           "local t = redis.call('TIME') local start = t[1] * 1000000 + t[2] "
                           "redis.call('INCR', KEYS[1]) "
                           "repeat local n = redis.call('TIME') until n[1] * 1000000 + n[2] - start > 600000 "
                           "return 1"};
  ASSERT_TRUE((*client)->Call("{slow}runs", {"SCRIPT", "LOAD", slow.source}).ok());
  auto v = (*client)->Eval(slow, {"{slow}runs"}, {});
  EXPECT_EQ(v.status().code(), Code::kUnavailable) << "the reply came after the timeout";
  // Read until five reads in a row are answered: a run sent again would hold the node (each read
  // meanwhile times out), and be counted once it ends.
  Result<redis::Value> runs = Status::Unavailable("not read");
  for (int i = 0, answered = 0; i < 100 && answered < 5; ++i) {
    runs = (*client)->Call("{slow}runs", {"GET", "{slow}runs"});
    answered = runs.ok() && !runs->is_error() ? answered + 1 : 0;
  }
  ASSERT_TRUE(runs.ok() && !runs->is_error()) << runs.status().ToString();
  EXPECT_EQ(runs->AsInt(), 1) << "the script ran again after its reply timed out";
}

// Redis down, then loading its data after a restart: every call answers kUnavailable (HTTP 503,
// "try again"), never an internal error, and the store is not healthy (GET /readyz: 503) until
// Redis serves again.
TEST(RedisStore, ARedisThatIsDownOrLoadingIsUnavailableAndNotReady) {
  TempDir dir;
  RedisServer redis({"--loading-process-events-interval-bytes", "1024"}, dir.path());
  redis::RedisQueueOptions o;
  o.url = redis.url();
  auto q = redis::RedisQueue::Open(o);
  ASSERT_TRUE(q.ok());
  ServerProcess server({"--store", redis.url()});
  auto client = server.NewClient();
  auto first = (*q)->Enqueue("load", Job("x"));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*q)->Enqueue("load", Job("held")).ok());
  auto held = (*q)->Reserve("load", {});
  ASSERT_TRUE(held.ok() && !held->empty());
  // Data that takes seconds to load with key-load-delay (a pause per key while loading).
  auto fill = (*q)->client().Call("", {"EVAL", "for i=1,5000 do redis.call('SET','filler:'..i,'v') end", "0"});
  ASSERT_TRUE(fill.ok() && !fill->is_error());
  ASSERT_TRUE((*q)->client().Call("", {"SAVE"}).ok());
  EXPECT_TRUE((*q)->Health().ok());
  EXPECT_TRUE(client->Health().ok());

  redis.Kill();
  EXPECT_EQ((*q)->Stats("load").code(), Code::kUnavailable);
  EXPECT_EQ((*q)->Health().code(), Code::kUnavailable);
  auto e = client->Enqueue("load", Job("y"));
  EXPECT_EQ(e.code(), Code::kUnavailable) << e.status().ToString();
  EXPECT_EQ(client->Health().code(), Code::kUnavailable) << "/readyz said ready with Redis down";

  redis.StartLoading({"--key-load-delay", "500"});
  auto expect_loading = [](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), Code::kUnavailable) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find("loading"), std::string::npos) << what << ": " << s.message();
  };
  expect_loading((*q)->Stats("load").status(), "stats");
  expect_loading((*q)->Enqueue("load", Job("z")).status(), "enqueue");
  expect_loading((*q)->Get("load", JobRef::ById(first->id)).status(), "get");
  expect_loading((*q)->Reserve("load", {}).status(), "reserve");
  expect_loading((*q)->Ack("load", (*held)[0].receipt), "ack");
  expect_loading((*q)->Health(), "health");
  expect_loading(client->Enqueue("load", Job("z")).status(), "enqueue over HTTP");
  expect_loading(client->Health(), "GET /readyz");

  redis.WaitLoaded();
  EXPECT_TRUE((*q)->Stats("load").ok());
  EXPECT_TRUE((*q)->Health().ok());
  EXPECT_TRUE(client->Enqueue("load", Job("after")).ok());
  EXPECT_TRUE(client->Health().ok());
  EXPECT_TRUE((*q)->Get("load", JobRef::ById(first->id)).ok()) << "it was in the saved RDB";
}

TEST(RedisDoctor, NamesEveryProblemWithItsFix) {
  RedisServer bad({"--maxmemory-policy", "allkeys-lru"});
  RunResult r = RunProcess({DELAYQ_BIN, "doctor", bad.url()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("maxmemory-policy is allkeys-lru"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("noeviction"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("appendonly is no"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 problems found"), std::string::npos) << r.out;

  RedisServer fsync({"--appendonly", "yes", "--appendfsync", "no"});
  r = RunProcess({DELAYQ_BIN, "doctor", fsync.url()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("appendfsync is no"), std::string::npos) << r.out;

  RedisServer good({"--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction"});
  r = RunProcess({DELAYQ_BIN, "doctor", good.url()});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("no setting found"), std::string::npos) << r.out;

  r = RunProcess({DELAYQ_BIN, "doctor", "redis://127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 5) << "unreachable";
}

TEST(RedisDoctor, ClusterWithUncoveredSlots) {
  // A cluster-enabled node that was never given slots.
  TempDir dir;
  RedisServer lonely({"--cluster-enabled", "yes", "--cluster-config-file", dir.Sub("nodes.conf")}, dir.path());
  RunResult r = RunProcess({DELAYQ_BIN, "doctor", "redis-cluster://127.0.0.1:" + std::to_string(lonely.port())});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("0 of 16384 slots served"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("redis-cli --cluster fix"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace delayq::testing

namespace delayq::testing {
namespace {

// Found by the history checker under load (a queue deleted during a failover came back): with
// --redis-wait-replicas, a job's writes waited for the replicas, but a queue's config, pause and
// delete did not, so a failover could lose them after they were acknowledged. On a
// Redis with no replica, each must now be refused as unconfirmed instead of answered ok.
TEST(RedisStore, WithWaitReplicasEveryAcknowledgedWriteWaitsForThem) {
  RedisServer redis;
  redis::RedisQueueOptions plain;
  plain.url = redis.url();
  auto setup = redis::RedisQueue::Open(plain);
  ASSERT_TRUE(setup.ok()) << setup.status().ToString();
  ASSERT_TRUE((*setup)->Enqueue("kept", Job("1")).ok());
  redis::RedisQueueOptions waiting = plain;
  waiting.wait_replicas = 1;
  waiting.wait_timeout_ms = 50;
  auto q = redis::RedisQueue::Open(waiting);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto unconfirmed = [](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), Code::kUnavailable) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find("replicas"), std::string::npos) << what << ": " << s.message();
  };
  unconfirmed((*q)->Enqueue("kept", Job("2")).status(), "an enqueue");
  unconfirmed((*q)->Enqueue("made-now", Job("1")).status(), "an enqueue that makes its queue");
  QueueConfig c;
  c.max_attempts = 3;
  unconfirmed((*q)->SetConfig("kept", c), "a config");
  unconfirmed((*q)->Pause("kept"), "a pause");
  unconfirmed((*q)->DeleteQueue("kept", true).status(), "a delete");
}

}  // namespace
}  // namespace delayq::testing
