// The Queue conformance suite (see queue_conformance.h): the job lifecycle itself (enqueue, due,
// delivered once, leases, restart, many threads); the other concerns are in files of their own
// (receipts_, reserve_, job_changes_, dead_, queue_admin_conformance.cc and the feature files).
// Each test uses its own queue name, so stores that are shared between tests (a Redis server, an
// HTTP server) stay correct.
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

TEST_P(QueueConformance, EnqueueThenGetReturnsTheJobAsStored) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job(std::string("bin\0ary\xff", 8), 10 * h_->unit_ms());
  r.headers = {{"version", "2"}, {"trace", "abc"}};
  r.key = "order-42";
  r.max_attempts = 7;
  const int64_t before = h_->NowMs();
  EnqueueResult e = MustEnqueue(q(), queue, r);
  EXPECT_EQ(e.id.size(), 26u);
  EXPECT_FALSE(e.duplicate);
  EXPECT_GE(e.due_at_ms, before + 10 * h_->unit_ms());

  auto job = q().Get(queue, JobRef::ById(e.id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->id, e.id);
  EXPECT_EQ(job->queue, queue);
  EXPECT_EQ(job->state, JobState::kScheduled);
  EXPECT_EQ(job->payload, std::string("bin\0ary\xff", 8));
  EXPECT_EQ(job->headers, r.headers);
  EXPECT_EQ(job->key, "order-42");
  EXPECT_EQ(job->max_attempts, 7);
  EXPECT_EQ(job->attempt, 0);
  EXPECT_EQ(job->due_at_ms, e.due_at_ms);
  EXPECT_GE(job->created_at_ms, before);

  auto by_key = q().Get(queue, JobRef::ByKey("order-42"));
  ASSERT_TRUE(by_key.ok()) << by_key.status().ToString();
  EXPECT_EQ(by_key->id, e.id);

  EXPECT_EQ(q().Get(queue, JobRef::ById("01JDQ8Z3K6T6V3W1C9X2N4M5PQ")).code(), Code::kNotFound);
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("nope")).code(), Code::kNotFound);
  EXPECT_EQ(q().Get(queue, JobRef::ById("not-an-id")).code(), Code::kInvalidArgument);
}

TEST_P(QueueConformance, NeverEarly) {
  const std::string queue = QueueName();
  const int64_t u = h_->unit_ms();
  EnqueueResult late = MustEnqueue(q(), queue, Job("late", 3 * u));
  EnqueueResult soon = MustEnqueue(q(), queue, Job("soon", 1 * u));
  EnqueueResult mid = MustEnqueue(q(), queue, Job("mid", 2 * u));
  // On a real clock a slow machine (a sanitizer build) may reach the first due time by now: what
  // this reserve answers must then be due, and nothing may come before the first due time.
  std::vector<Delivery> first = MustReserve(q(), queue);
  const int64_t checked_at = h_->NowMs();
  for (const Delivery& d : first) EXPECT_LE(d.due_at_ms, checked_at) << "delivered before it was due";
  if (h_->exact_time() || checked_at < soon.due_at_ms) {
    EXPECT_TRUE(first.empty()) << "delivered before any job was due";
  }
  if (h_->exact_time()) {
    h_->Advance(u - 1);
    EXPECT_TRUE(MustReserve(q(), queue).empty()) << "delivered 1 ms early";
    h_->Advance(1);
    auto got = MustReserve(q(), queue);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].id, soon.id);
    h_->Advance(u - 1);
    EXPECT_TRUE(MustReserve(q(), queue).empty()) << "delivered 1 ms early";
    h_->Advance(1);
    got = MustReserve(q(), queue);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].id, mid.id);
    h_->Advance(u);
    got = MustReserve(q(), queue);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].id, late.id);
  } else {
    auto rest = ReceiveAll(*h_, queue, 3 - first.size(), u / 3);
    std::vector<Delivery> got = first;
    got.insert(got.end(), rest.begin(), rest.end());
    ASSERT_EQ(got.size(), 3u);
    if (h_->ordered()) {
      EXPECT_EQ(got[0].id, soon.id);
      EXPECT_EQ(got[1].id, mid.id);
      EXPECT_EQ(got[2].id, late.id);
    }
  }
}

TEST_P(QueueConformance, JobsWithoutDelayOrWithAPastTimeAreReadyAtOnce) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("now"));
  EnqueueRequest past = Job("past");
  const int64_t sent = h_->NowMs();
  past.when.deliver_at_ms = sent - 3'600'000;
  EnqueueResult e = MustEnqueue(q(), queue, past);
  // Read before the request: a slow round trip cannot make this fail.
  EXPECT_GE(e.due_at_ms, sent - 5) << "a past deliver_at means due now";
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 2u);
  if (!h_->ordered() && got[0].payload == "past") std::swap(got[0], got[1]);
  EXPECT_EQ(got[0].payload, "now");
  EXPECT_EQ(got[1].payload, "past");
  EXPECT_EQ(got[0].attempt, 1);
}

TEST_P(QueueConformance, FifoAmongEqualDueTimes) {
  const std::string queue = QueueName();
  const int64_t at = h_->NowMs() + 5 * h_->unit_ms();
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    EnqueueRequest r = Job("job-" + std::to_string(i));
    r.when.deliver_at_ms = at;
    ids.push_back(MustEnqueue(q(), queue, r).id);
  }
  auto got = ReceiveAll(*h_, queue, ids.size(), h_->unit_ms());
  ASSERT_EQ(got.size(), ids.size());
  if (!h_->ordered()) {  // every job, in some order
    std::set<std::string> a(ids.begin(), ids.end()), b;
    for (auto& d : got) b.insert(d.id);
    EXPECT_EQ(a, b);
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i].id, ids[i]) << "position " << i;
}

TEST_P(QueueConformance, EveryJobIsDeliveredOnceWhenAcked) {
  const std::string queue = QueueName();
  std::mt19937 rng(7);
  std::set<std::string> ids;
  std::vector<EnqueueRequest> batch;
  for (int i = 0; i < 300; ++i) {
    batch.push_back(Job("p" + std::to_string(i), std::uniform_int_distribution<int64_t>(0, 5 * h_->unit_ms())(rng)));
    if (batch.size() == 100) {
      auto res = q().EnqueueBatch(queue, batch);
      ASSERT_TRUE(res.ok()) << res.status().ToString();
      for (auto& e : *res) ids.insert(e.id);
      batch.clear();
    }
  }
  ASSERT_EQ(ids.size(), 300u);
  std::set<std::string> seen;
  for (int step = 0; step < 100 && seen.size() < ids.size(); ++step) {
    auto got = MustReserve(q(), queue);
    const int64_t now = h_->NowMs();
    std::vector<std::string> receipts;
    for (auto& d : got) {
      EXPECT_GE(now, d.due_at_ms) << "delivered early";
      EXPECT_TRUE(seen.insert(d.id).second) << "delivered twice: " << d.id;
      receipts.push_back(d.receipt);
    }
    for (const Status& s : q().AckBatch(queue, receipts)) EXPECT_TRUE(s.ok()) << s.ToString();
    if (seen.size() < ids.size()) h_->Advance(h_->unit_ms() / 2);
  }
  EXPECT_EQ(seen, ids);
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.scheduled + s.ready + s.reserved, 0);
  EXPECT_EQ(s.counters.acked, 300u);
}

TEST_P(QueueConformance, LeaseExpiryRedeliversAndBumpsAttempt) {
  const std::string queue = QueueName();
  EnqueueResult e = MustEnqueue(q(), queue, Job("work"));
  // A real clock's lease leaves room for the calls made while it holds (a sanitizer build).
  const int64_t lease = h_->exact_time() ? 1000 : 2500;
  auto first = MustReserve(q(), queue, 1, lease);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].attempt, 1);
  EXPECT_TRUE(MustReserve(q(), queue).empty()) << "a reserved job was handed out twice";
  auto job = q().Get(queue, JobRef::ById(e.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReserved);
  if (h_->exact_time()) {
    h_->Advance(999);
    EXPECT_TRUE(MustReserve(q(), queue).empty()) << "redelivered before the lease ran out";
    h_->Advance(1);
  } else {
    h_->Advance(lease + 100);
  }
  auto second = ReserveEventually(*h_, queue, 1, 1, 60'000);  // held while the stale receipt is tried
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].id, e.id);
  EXPECT_EQ(second[0].attempt, 2);
  EXPECT_NE(second[0].receipt, first[0].receipt);

  EXPECT_EQ(q().Ack(queue, first[0].receipt).code(), Code::kLeaseExpired);
  EXPECT_EQ(q().Touch(queue, first[0].receipt, std::nullopt).code(), Code::kLeaseExpired);
  NackRequest stale{first[0].receipt, 0, "stale", false};
  EXPECT_EQ(q().Nack(queue, stale).code(), Code::kLeaseExpired);
  EXPECT_TRUE(q().Ack(queue, second[0].receipt).ok());
  EXPECT_EQ(q().Ack(queue, second[0].receipt).code(), Code::kNotFound);
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.counters.redelivered, 1u);
  EXPECT_EQ(s.counters.delivered, 2u);
}

// Recovery, on every store: after a restart every job is where it was — scheduled, ready,
// reserved (its receipt still good, its lease still running out when it did), dead — with its
// attempts, key and due time; the config and a pause stay; and time goes on from there: the
// scheduled job comes due, the lease runs out and the job is delivered again.
TEST_P(QueueConformance, EveryStateSurvivesARestart) {
  const std::string queue = QueueName(), paused = QueueName();
  const int64_t unit = h_->unit_ms();
  QueueConfig config;
  config.max_attempts = 3;
  // A lease far longer than any restart (a server under ASan on a loaded machine takes seconds to
  // come back: CI saw the lease run out during it); after the restart a touch shortens it.
  config.lease_ms = 600'000;
  const int64_t short_lease = std::max<int64_t>(delayq::Limits::kMinLeaseMs, 4 * unit);
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  // A dead one (its own max_attempts), a reserved one, a ready one, a keyed scheduled one.
  EnqueueRequest doomed = Job("dead");
  doomed.max_attempts = 1;
  MustEnqueue(q(), queue, doomed);
  auto first = MustReserve(q(), queue, 1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(q().Nack(queue, {.receipt = first[0].receipt, .error = "boom"}).ok());
  MustEnqueue(q(), queue, Job("held"));
  auto held = MustReserve(q(), queue, 1);
  ASSERT_EQ(held.size(), 1u);
  const auto ready = MustEnqueue(q(), queue, Job("ready"));
  EnqueueRequest keyed = Job("later", 10 * unit);
  keyed.key = "later-key";
  const auto later = MustEnqueue(q(), queue, keyed);
  ASSERT_TRUE(q().Pause(paused).ok());
  MustEnqueue(q(), paused, Job("waits"));
  auto snapshot = [&](const std::string& id) {
    auto j = q().Get(queue, JobRef::ById(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : delayq::Job{};
  };
  const delayq::Job before[] = {snapshot(first[0].id), snapshot(held[0].id), snapshot(ready.id), snapshot(later.id)};
  const QueueStats stats = MustStats(q(), queue);

  h_->Restart();

  // A slow restart (a sanitizer build on a real clock) may outlast the scheduled job's delay: read
  // the time after the reads, and let that one job be ready if it was due by then.
  std::vector<delayq::Job> now_jobs;
  for (const delayq::Job& b : before) now_jobs.push_back(snapshot(b.id));
  const QueueStats after = MustStats(q(), queue);
  const bool later_came_due = h_->NowMs() >= later.due_at_ms;
  for (size_t i = 0; i < now_jobs.size(); ++i) {
    const delayq::Job& b = before[i];
    const delayq::Job& a = now_jobs[i];
    if (b.id == later.id && later_came_due) {
      EXPECT_TRUE(a.state == JobState::kScheduled || a.state == JobState::kReady) << b.payload;
    } else {
      EXPECT_EQ(a.state, b.state) << b.payload;
    }
    EXPECT_EQ(a.due_at_ms, b.due_at_ms) << b.payload;
    EXPECT_EQ(a.attempt, b.attempt) << b.payload;
    EXPECT_EQ(a.max_attempts, b.max_attempts) << b.payload;
    EXPECT_EQ(a.key, b.key) << b.payload;
    EXPECT_EQ(a.payload, b.payload);
    EXPECT_EQ(a.last_error, b.last_error) << b.payload;
    EXPECT_EQ(a.lease_deadline_ms, b.lease_deadline_ms) << b.payload;
    EXPECT_EQ(a.dead_at_ms, b.dead_at_ms) << b.payload;
  }
  EXPECT_EQ(after.scheduled + after.ready, stats.scheduled + stats.ready);
  if (!later_came_due) {
    EXPECT_EQ(after.scheduled, stats.scheduled);
    EXPECT_EQ(after.ready, stats.ready);
  }
  EXPECT_EQ(after.reserved, stats.reserved);
  EXPECT_EQ(after.dead, stats.dead);
  auto config_after = q().GetConfig(queue);
  ASSERT_TRUE(config_after.ok());
  EXPECT_EQ(*config_after, config);
  EXPECT_TRUE(MustStats(q(), paused).paused);
  EXPECT_TRUE(MustReserve(q(), paused).empty()) << "a paused queue stays paused";
  auto dup = q().Enqueue(queue, keyed);
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->duplicate) << "the key still names its job";
  EXPECT_EQ(dup->id, later.id);

  // The reserved job's receipt still touches; once its lease runs out the job is delivered again.
  // A slow restart (a sanitizer build: CI saw 2 s) may let the scheduled job come due meanwhile:
  // it may then come with the others, never before its due time.
  std::optional<Delivery> due_one;
  auto take = [&](const Delivery& d) {
    if (d.id != later.id) return false;
    EXPECT_FALSE(due_one) << "the scheduled job was delivered twice";
    EXPECT_GE(h_->NowMs(), later.due_at_ms) << "the scheduled job came early";
    due_one = d;
    return true;
  };
  ASSERT_TRUE(q().Touch(queue, held[0].receipt, short_lease).ok()) << "a receipt survives the restart";
  auto ready_now = MustReserve(q(), queue, 10);
  std::erase_if(ready_now, take);
  ASSERT_EQ(ready_now.size(), 1u);
  EXPECT_EQ(ready_now[0].id, ready.id);
  ASSERT_TRUE(q().Ack(queue, ready_now[0].receipt).ok());
  h_->Advance(short_lease + unit);
  std::vector<Delivery> again;
  for (int i = 0; i < 3 && again.empty(); ++i) {
    again = ReceiveAll(*h_, queue, 1, unit / 4 + 1);
    std::erase_if(again, take);
  }
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, held[0].id);
  EXPECT_EQ(again[0].attempt, 2);
  EXPECT_EQ(q().Ack(queue, held[0].receipt).code(), Code::kLeaseExpired);
  ASSERT_TRUE(q().Ack(queue, again[0].receipt).ok());
  // The scheduled job comes due when it said; the dead one replays.
  if (!due_one) {
    auto due = ReceiveAll(*h_, queue, 1, unit);
    ASSERT_EQ(due.size(), 1u);
    ASSERT_TRUE(take(due[0])) << due[0].id;
  }
  EXPECT_EQ(due_one->id, later.id);
  EXPECT_GE(h_->NowMs(), later.due_at_ms);
  const std::vector<std::string> dead_ids = {first[0].id};
  EXPECT_EQ(*q().ReplayDead(queue, dead_ids), 1);
}

TEST_P(QueueConformance, ManyThreadsNeverLoseOrShareAJob) {
  const std::string queue = QueueName();
  constexpr int kProducers = 4, kPerProducer = 250, kConsumers = 4;
  constexpr int kTotal = kProducers * kPerProducer;
  std::mutex mu;
  std::set<std::string> enqueued, held, acked;
  std::atomic<int> violations{0};
  std::atomic<bool> producers_done{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        auto e = q().Enqueue(queue, Job("p" + std::to_string(p) + "-" + std::to_string(i)));
        if (!e.ok()) {
          ++violations;
          continue;
        }
        std::lock_guard lock(mu);
        enqueued.insert(e->id);
      }
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      while (true) {
        {
          std::lock_guard lock(mu);
          if (producers_done && acked.size() == enqueued.size()) return;
        }
        auto got = q().Reserve(queue, ReserveRequest{8, 0, std::nullopt});
        if (!got.ok()) {
          ++violations;
          return;
        }
        if (got->empty()) std::this_thread::yield();
        for (auto& d : *got) {
          {
            std::lock_guard lock(mu);
            if (!held.insert(d.id).second) ++violations;  // someone else holds it too
          }
          if (!q().Ack(queue, d.receipt).ok()) ++violations;
          std::lock_guard lock(mu);
          held.erase(d.id);
          if (!acked.insert(d.id).second) ++violations;
        }
      }
    });
  }
  for (int p = 0; p < kProducers; ++p) threads[p].join();
  producers_done = true;
  for (size_t i = kProducers; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(enqueued.size(), static_cast<size_t>(kTotal));
  EXPECT_EQ(acked, enqueued);
}

}  // namespace

void ExpectTheQueueLimitHolds(Queue& q) {
  ASSERT_TRUE(q.Enqueue("limit-a", Job("a")).ok());
  ASSERT_TRUE(q.Pause("limit-b").ok());
  ASSERT_TRUE(q.SetConfig("limit-c", QueueConfig{}).ok());
  auto refused = [](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), Code::kResourceExhausted) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find("max-queues"), std::string::npos) << s.message();
  };
  refused(q.Enqueue("limit-d", Job("d")).status(), "enqueue");
  std::vector<EnqueueRequest> batch(2, Job("d"));
  refused(q.EnqueueBatch("limit-d", batch).status(), "batch");
  refused(q.Pause("limit-d"), "pause");
  refused(q.Resume("limit-d"), "resume");
  refused(q.SetConfig("limit-d", QueueConfig{}), "config");
  EXPECT_EQ(q.Stats("limit-d").code(), Code::kNotFound) << "a refused call created the queue";
  auto reserved = q.Reserve("limit-d", {});
  ASSERT_TRUE(reserved.ok()) << "a reserve on a name that is not a queue is empty, not an error";
  EXPECT_TRUE(reserved->empty());
  auto all = q.ListQueues();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
  // The queues there are still work.
  EXPECT_TRUE(q.Enqueue("limit-b", Job("b")).ok());
  EXPECT_TRUE(q.Resume("limit-b").ok());
  EXPECT_TRUE(q.Enqueue("limit-c", Job("c")).ok());
}

}  // namespace delayq::testing
