// The embedded engine: the conformance suite in three configurations, plus what only the
// engine has — recovery on reopen, the bounded window, and failing writes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "store/embedded/engine_harness.h"

namespace delayq::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Engine, QueueConformance,
    ::testing::Values(HarnessFactory{"sync", [] { return std::make_unique<EngineHarness>(Durability::kSync); }},
                      HarnessFactory{"none", [] { return std::make_unique<EngineHarness>(Durability::kNone); }},
                      // A tiny window: every test also exercises refills from disk and evictions.
                      HarnessFactory{"tiny_window",
                                     [] {
                                       return std::make_unique<EngineHarness>(Durability::kInterval,
                                                                              [](EngineOptions& o) {
                                                                                o.window_capacity = 16;
                                                                                o.window_refill = 4;
                                                                              });
                                     }}),
    HarnessName);

EnqueueRequest Job(std::string payload, std::optional<int64_t> delay_ms = std::nullopt) {
  EnqueueRequest r;
  r.payload = std::move(payload);
  r.when.delay_ms = delay_ms;
  return r;
}

TEST(EngineRecovery, ReopenKeepsEveryStateDueTimeAndReceipt) {
  EngineHarness h(Durability::kSync);
  Queue& q = h.queue();
  auto scheduled = q.Enqueue("orders", Job("scheduled", 3'600'000));
  ASSERT_TRUE(scheduled.ok());
  EnqueueRequest keyed = Job("keyed", 7 * 86'400'000LL);
  keyed.key = "order-1";
  ASSERT_TRUE(q.Enqueue("orders", keyed).ok());
  auto ready = q.Enqueue("orders", Job("ready"));
  auto reserved = q.Enqueue("orders", Job("reserved"));
  ASSERT_TRUE(ready.ok() && reserved.ok());
  auto got = q.Reserve("orders", {1, 0, 60'000});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, ready->id);
  EnqueueRequest fragile = Job("dies");
  fragile.max_attempts = 1;
  ASSERT_TRUE(q.Enqueue("orders", fragile).ok());
  auto d = q.Reserve("orders", {2, 0, std::nullopt});  // "reserved", then "dies"
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 2u);
  ASSERT_TRUE(q.Nack("orders", {(*d)[1].receipt, std::nullopt, "boom", false}).ok());
  QueueConfig c;
  c.max_attempts = 9;
  ASSERT_TRUE(q.SetConfig("orders", c).ok());
  ASSERT_TRUE(q.Pause("paused-q").ok());
  const QueueStats before = *q.Stats("orders");

  h.Reopen();
  Queue& q2 = h.queue();
  QueueStats after = *q2.Stats("orders");
  EXPECT_EQ(after.scheduled, before.scheduled);
  EXPECT_EQ(after.ready, before.ready);
  EXPECT_EQ(after.reserved, before.reserved);
  EXPECT_EQ(after.dead, 1);
  EXPECT_EQ(after.scheduled, 2);
  EXPECT_EQ(after.reserved, 2);
  EXPECT_EQ(q2.Get("orders", JobRef::ById(scheduled->id))->due_at_ms, scheduled->due_at_ms);
  EXPECT_EQ(q2.Get("orders", JobRef::ByKey("order-1"))->payload, "keyed");
  EXPECT_TRUE(q2.Enqueue("orders", keyed)->duplicate) << "the key index survives";
  EXPECT_EQ(q2.GetConfig("orders")->max_attempts, 9);
  EXPECT_TRUE(q2.Stats("paused-q")->paused);
  // Receipts from before the restart still work.
  EXPECT_TRUE(q2.Ack("orders", (*got)[0].receipt).ok());
  // A reserved job comes back when its lease (30 s default) runs out, not before.
  h.Advance(29'999);
  EXPECT_TRUE(q2.Reserve("orders", {})->empty());
  h.Advance(1);
  auto again = q2.Reserve("orders", {});
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].id, reserved->id);
  EXPECT_EQ((*again)[0].attempt, 2);
  auto dead = q2.ListDead("orders", 10);
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].last_error, "boom");
}

TEST(EngineRecovery, LeaseThatRanOutWhileClosedIsRedeliveredAtOnce) {
  EngineHarness h;
  ASSERT_TRUE(h.queue().Enqueue("q", Job("x")).ok());
  auto got = h.queue().Reserve("q", {1, 0, 5000});
  ASSERT_EQ(got->size(), 1u);
  h.Close();
  h.Advance(60'000);
  h.Reopen();
  auto again = h.queue().Reserve("q", {});
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].attempt, 2);
  EXPECT_EQ(h.queue().Stats("q")->counters.redelivered, 1u);
}

TEST(EngineRecovery, NewIdsSortAfterRecoveredOnesEvenIfTheClockStepsBack) {
  EngineHarness h;
  auto a = h.queue().Enqueue("q", Job("a", 1000));
  ASSERT_TRUE(a.ok());
  h.Reopen();  // same manual clock time: ids must still increase
  auto b = h.queue().Enqueue("q", Job("b", 1000));
  ASSERT_TRUE(b.ok());
  EXPECT_LT(a->id, b->id);
  h.Advance(1000);
  auto got = h.queue().Reserve("q", {10, 0, std::nullopt});
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].id, a->id);
}

TEST(EngineWindow, MemoryHoldsABoundedWindowOfScheduledJobs) {
  EngineHarness h(Durability::kNone, [](EngineOptions& o) {
    o.window_capacity = 64;
    o.window_refill = 16;
  });
  Queue& q = h.queue();
  // 5 000 jobs due over the next 5 000 s, enqueued in a scrambled order.
  std::vector<EnqueueRequest> batch;
  for (int i = 0; i < 5000; ++i) {
    int64_t delay = 1000 + ((i * 7919) % 5000) * 1000;
    batch.push_back(Job(std::to_string(delay), delay));
    if (batch.size() == 1000) {
      ASSERT_TRUE(q.EnqueueBatch("q", batch).ok());
      batch.clear();
    }
  }
  EXPECT_LE(h.engine().Info().window_entries, 64u);
  EXPECT_EQ(q.Stats("q")->scheduled, 5000);
  h.Reopen();
  EXPECT_LE(h.engine().Info().window_entries, 64u);
  int64_t last_due = 0;
  int received = 0;
  for (int step = 0; step < 5001; ++step) {
    h.Advance(1000);
    auto got = h.queue().Reserve("q", {1000, 0, std::nullopt});
    ASSERT_TRUE(got.ok());
    for (auto& d : *got) {
      EXPECT_GE(h.NowMs(), d.due_at_ms);
      EXPECT_GE(d.due_at_ms, last_due) << "out of order";
      last_due = d.due_at_ms;
      ++received;
      ASSERT_TRUE(h.queue().Ack("q", d.receipt).ok());
    }
    ASSERT_LE(h.engine().Info().window_entries, 64u);
  }
  EXPECT_EQ(received, 5000);
}

TEST(EngineWindow, JobsInsertedBeyondAndBeforeTheWindowAreAllDelivered) {
  EngineHarness h(Durability::kNone, [](EngineOptions& o) {
    o.window_capacity = 16;
    o.window_refill = 4;
  });
  Queue& q = h.queue();
  std::set<std::string> ids;
  for (int i = 0; i < 40; ++i) ids.insert(q.Enqueue("q", Job("far", 100'000 + i * 10))->id);
  for (int i = 0; i < 40; ++i) ids.insert(q.Enqueue("q", Job("near", 50 + i))->id);
  ids.insert(q.Enqueue("q", Job("now"))->id);
  std::set<std::string> seen;
  for (int step = 0; step < 200 && seen.size() < ids.size(); ++step) {
    for (auto& d : *q.Reserve("q", {1000, 0, std::nullopt})) {
      EXPECT_GE(h.NowMs(), d.due_at_ms);
      EXPECT_TRUE(seen.insert(d.id).second);
      ASSERT_TRUE(q.Ack("q", d.receipt).ok());
    }
    h.Advance(1000);
  }
  EXPECT_EQ(seen, ids);
}

// A record that cannot be read in the middle of a reserve in ready order (priorities, groups)
// delivers nothing and puts every job it had picked back in the order. (It left the picks before
// the failed read out of the order: ready, counted, and never delivered again.)
TEST(EngineFaults, AFailedReadInAnOrderedReserveLeavesEveryJobDeliverable) {
  EngineHarness h(Durability::kNone);
  Queue& q = h.queue();
  std::vector<EnqueueRequest> jobs(40, Job("x"));
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].priority = static_cast<int32_t>(i % 10);
    jobs[i].group = "tenant-" + std::to_string(i % 3);
  }
  ASSERT_TRUE(q.EnqueueBatch("ordered", jobs).ok());
  for (int skip : {0, 1, 2}) {  // the first chunk's read, the second's, the third's
    h.faults().FailReads(1, skip);
    auto failed = q.Reserve("ordered", {.max = 40});
    EXPECT_EQ(failed.code(), Code::kIoError) << "skip " << skip;
    EXPECT_EQ(q.Stats("ordered")->ready, 40);
  }
  auto all = q.Reserve("ordered", {.max = 40});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->size(), 40u);
  for (const Delivery& d : *all) EXPECT_EQ(d.attempt, 1);
}

TEST(EngineFaults, FailedWritesChangeNothingAndSayWhy) {
  EngineHarness h(Durability::kSync);
  Queue& q = h.queue();
  auto kept = q.Enqueue("q", Job("kept"));
  ASSERT_TRUE(kept.ok());
  const QueueStats before = *q.Stats("q");

  h.faults().FailWrites(1);
  auto e = q.Enqueue("q", Job("lost"));
  EXPECT_EQ(e.code(), Code::kIoError);
  EXPECT_NE(e.status().message().find("writing to the store"), std::string::npos);
  h.faults().FailWrites(1);
  EXPECT_EQ(q.EnqueueBatch("q", std::vector<EnqueueRequest>{Job("a"), Job("b")}).code(), Code::kIoError);
  EXPECT_EQ(q.Stats("q")->ready, before.ready);
  EXPECT_EQ(q.Stats("q")->counters.enqueued, before.counters.enqueued);

  h.faults().FailWrites(1);
  EXPECT_EQ(q.Reserve("q", {}).code(), Code::kIoError);
  EXPECT_EQ(q.Stats("q")->ready, 1) << "a failed reserve leaves the job ready";
  auto got = q.Reserve("q", {});
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].attempt, 1) << "the failed reserve did not count an attempt";

  h.faults().FailWrites(1);
  EXPECT_EQ(q.Ack("q", (*got)[0].receipt).code(), Code::kIoError);
  EXPECT_EQ(q.Stats("q")->reserved, 1);
  h.faults().FailWrites(1);
  EXPECT_EQ(q.Nack("q", {(*got)[0].receipt, 0, "x", false}).code(), Code::kIoError);
  EXPECT_EQ(q.Stats("q")->reserved, 1);
  h.faults().FailWrites(1);
  EXPECT_EQ(q.Touch("q", (*got)[0].receipt, 60'000).code(), Code::kIoError);

  auto sched = q.Enqueue("q", Job("s", 5000));
  ASSERT_TRUE(sched.ok());
  h.faults().FailWrites(1);
  EXPECT_EQ(q.Cancel("q", JobRef::ById(sched->id)).code(), Code::kIoError);
  h.faults().FailWrites(1);
  EXPECT_EQ(q.Reschedule("q", JobRef::ById(sched->id), When{0, {}}).code(), Code::kIoError);
  EXPECT_EQ(q.Get("q", JobRef::ById(sched->id))->due_at_ms, sched->due_at_ms);
  h.faults().FailWrites(1);
  EXPECT_EQ(q.Pause("q").code(), Code::kIoError);
  EXPECT_FALSE(q.Stats("q")->paused);

  // A failed fsync in sync mode is reported too.
  h.faults().FailSyncs(1);
  EXPECT_EQ(q.Enqueue("q", Job("unsynced")).code(), Code::kIoError);

  // Everything works again afterwards, and a reopen shows the same state as before.
  EXPECT_TRUE(q.Ack("q", (*got)[0].receipt).ok());
  const QueueStats mid = *q.Stats("q");
  h.Reopen();
  const QueueStats after = *h.queue().Stats("q");
  EXPECT_EQ(after.scheduled, mid.scheduled);
  EXPECT_EQ(after.ready, mid.ready);
  EXPECT_EQ(after.reserved, 0);
}

TEST(EngineFaults, ExpiredLeaseOnLastAttemptIsRetriedWhenTheDeadWriteFails) {
  EngineHarness h;
  EnqueueRequest r = Job("x");
  r.max_attempts = 1;
  ASSERT_TRUE(h.queue().Enqueue("q", r).ok());
  ASSERT_EQ(h.queue().Reserve("q", {1, 0, 1000})->size(), 1u);
  h.faults().FailWrites(1);
  h.Advance(1000);
  (void)h.queue().Stats("q");  // the tick tries the dead write, which fails
  EXPECT_EQ(h.queue().Stats("q")->reserved, 1);
  h.Advance(1000);
  auto s = h.queue().Stats("q");
  EXPECT_EQ(s->dead, 1);
  EXPECT_EQ(s->reserved, 0);
}

TEST(EngineLifecycle, CloseAnswersWaitersAndRefusesLaterCalls) {
  EngineHarness h;
  std::promise<size_t> answered;
  h.queue().ReserveAsync("q", {1, 60'000, std::nullopt},
                         [&](Result<std::vector<Delivery>> r) { answered.set_value(r.ok() ? r->size() : 999); });
  EXPECT_EQ(h.engine().Info().waiters, 1u);
  h.engine().Close();
  EXPECT_EQ(answered.get_future().get(), 0u);
  EXPECT_EQ(h.queue().Enqueue("q", Job("x")).code(), Code::kUnavailable);
}

TEST(EngineLifecycle, OpenRefusesBadOptionsAndALockedDirectory) {
  EXPECT_EQ(Engine::Open({}).code(), Code::kInvalidArgument);
  TempDir dir;
  EngineOptions o;
  o.path = dir.Sub("d");
  o.window_capacity = 1;
  EXPECT_EQ(Engine::Open(o).code(), Code::kInvalidArgument);
  o.window_capacity = 1 << 20;
  auto first = Engine::Open(o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Engine::Open(o);
  EXPECT_EQ(second.code(), Code::kIoError);
  EXPECT_NE(second.status().message().find("another delayq"), std::string::npos) << second.status().message();
}

// Info tells how operations use the engine's one lock: every operation takes it once, it is never
// held longer than the time that passed, nor found taken more often than it was taken.
TEST(EngineLock, InfoCountsTheOperationsOnTheLockAndTheirTime) {
  EngineHarness h(Durability::kNone);
  // The window measured holds both Info calls, so every hold they count lies inside it.
  const auto start = std::chrono::steady_clock::now();
  const EngineInfo before = h.engine().Info();
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(h.queue().Enqueue("q", Job("x")).ok());
  auto got = h.queue().Reserve("q", {50, 0, std::nullopt});
  ASSERT_TRUE(got.ok());
  std::vector<std::string> receipts;
  for (const auto& d : *got) receipts.push_back(d.receipt);
  for (const Status& s : h.queue().AckBatch("q", receipts)) ASSERT_TRUE(s.ok()) << s.ToString();
  const EngineInfo after = h.engine().Info();
  const auto ran_us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
  const uint64_t taken = after.lock_acquisitions - before.lock_acquisitions;
  EXPECT_GE(taken, 52u);
  EXPECT_LE(after.lock_contended - before.lock_contended, taken);
  EXPECT_GT(after.lock_held_us, before.lock_held_us);
  // One thread at a time holds it: the time held fits in the time that passed (other threads',
  // such as the schedule runner's, included; one of theirs may have begun just before).
  EXPECT_LE(after.lock_held_us - before.lock_held_us, static_cast<uint64_t>(ran_us.count()) + 2'000);
}

// The queue meta record: version 1 (pinned bytes, as 0.2 wrote them) is still read and still
// written for a queue without flow control, so an older delayq reads it; flow control makes it
// version 2, and group_max_reserved or a priority_aging_ms other than the default version 3; a
// newer version is refused by name.
TEST(EngineRecords, QueueMetaIsVersionTwoOnlyWithFlowControl) {
  const std::string v1(
      "\x01\x03\x05\xe8\x07\x40\x00\x00\x00\x00\x00\x00\x00\x80\xdd\xdb\x01\x3f\xb9\x99\x99\x99\x99"
      "\x99\x9a\xb0\xea\x01\x80\x80\x40\x80\x88\xb2\xa0\x02\x80\xd8\xc4\xbd\x75",
      41);
  QueueMeta m;
  ASSERT_TRUE(DecodeQueueMeta(v1, &m).ok());
  EXPECT_TRUE(m.has_config);
  EXPECT_TRUE(m.paused);
  EXPECT_EQ(m.config, QueueConfig{}) << "no flow control in a version 1 record";
  EXPECT_EQ(EncodeQueueMeta(m), v1) << "a queue without flow control is still written as version 1";

  m.config.rate_per_s = 12.5;
  m.config.burst = 40;
  m.config.max_reserved = 300;
  const std::string v2 = EncodeQueueMeta(m);
  EXPECT_EQ(v2[0], '\x02');
  QueueMeta back;
  ASSERT_TRUE(DecodeQueueMeta(v2, &back).ok());
  EXPECT_EQ(back.config, m.config);
  EXPECT_EQ(DecodeQueueMeta(v2.substr(0, v2.size() - 1), &back).code(), Code::kCorruption);
  m.config.group_max_reserved = 7;
  m.config.priority_aging_ms = 0;
  const std::string v3 = EncodeQueueMeta(m);
  EXPECT_EQ(v3[0], '\x03');
  ASSERT_TRUE(DecodeQueueMeta(v3, &back).ok());
  EXPECT_EQ(back.config, m.config);
  EXPECT_EQ(DecodeQueueMeta(v3.substr(0, v3.size() - 1), &back).code(), Code::kCorruption);
  // Version 2's bytes (pinned above by the encoder of this release) still read with the defaults.
  ASSERT_TRUE(DecodeQueueMeta(v2, &back).ok());
  EXPECT_EQ(back.config.group_max_reserved, 0);
  EXPECT_EQ(back.config.priority_aging_ms, 60'000);
  // Version 4 adds keep_completed_ms, written only when it is set.
  m.config.keep_completed_ms = 86'400'000;
  const std::string v4 = EncodeQueueMeta(m);
  EXPECT_EQ(v4[0], '\x04');
  EXPECT_EQ(v4.substr(v3.size()), std::string("\x80\xb8\x99\x29", 4)) << "then keep_completed_ms as a varint";
  ASSERT_TRUE(DecodeQueueMeta(v4, &back).ok());
  EXPECT_EQ(back.config.keep_completed_ms, 86'400'000);
  ASSERT_TRUE(DecodeQueueMeta(v3, &back).ok());
  EXPECT_EQ(back.config.keep_completed_ms, 0) << "before version 4: none kept";
  std::string v5 = v4;
  v5[0] = '\x05';
  auto newer = DecodeQueueMeta(v5, &back);
  EXPECT_EQ(newer.code(), Code::kCorruption);
  EXPECT_NE(newer.message().find("newer than this delayq understands"), std::string::npos) << newer.message();
}

// A clock that moves a millisecond each time it is read: time always passes between two looks.
class TickingClock final : public Clock {
 public:
  int64_t NowUs() const override { return kStartUs + 1000 * ticks_.fetch_add(1); }
  int64_t MonoUs() const override { return 1000 * ticks_.fetch_add(1); }
  std::chrono::microseconds RealTimeUntil(int64_t, int64_t) const override { return std::chrono::milliseconds(5); }
  uint64_t AddListener(std::function<void()>) override { return 1; }
  void RemoveListener(uint64_t) override {}

 private:
  mutable std::atomic<int64_t> ticks_{0};
};

// A schedule's pass reads the clock once per try: time that moved on meanwhile (a slow machine)
// must not look like missed runs and turn every try into a conflict with itself. Found under
// ThreadSanitizer on Redis: a replaced schedule's pass gave up ("kept changing") and its next run
// was no job.
TEST(EngineSchedules, APutMakesItsNextRunAJobWhileTheClockKeepsMoving) {
  EngineHarness h(Durability::kNone, [](EngineOptions& o) { o.clock = std::make_shared<TickingClock>(); });
  ScheduleSpec spec;
  spec.name = "hourly";
  spec.every_ms = 3'600'000;
  for (int i = 0; i < 5; ++i) {
    spec.payload = std::to_string(i);
    auto put = h.queue().PutSchedule("q", spec);
    ASSERT_TRUE(put.ok()) << "put " << i << ": " << put.status().ToString();
    ASSERT_FALSE(put->next_runs.empty());
    auto job = h.queue().Get("q", JobRef::ByKey("schedule:hourly:" + std::to_string(put->next_runs[0])));
    ASSERT_TRUE(job.ok()) << "put " << i << ": its next run is no job: " << job.status().ToString();
    EXPECT_EQ(job->payload, std::to_string(i));
  }
}

TEST(EngineScheduler, ThousandsOfWaitersAreServedInOrderOfArrival) {
  EngineHarness h;
  std::vector<std::promise<std::string>> answers(2000);
  for (auto& p : answers) {
    h.queue().ReserveAsync("q", {1, 60'000, std::nullopt}, [&p](Result<std::vector<Delivery>> r) {
      p.set_value(r.ok() && !r->empty() ? (*r)[0].payload : "");
    });
  }
  EXPECT_EQ(h.engine().Info().waiters, 2000u);
  std::vector<EnqueueRequest> batch;
  for (int i = 0; i < 1000; ++i) batch.push_back(Job(std::to_string(i), 10));
  ASSERT_TRUE(h.queue().EnqueueBatch("q", batch).ok());
  h.Advance(10);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(answers[i].get_future().get(), std::to_string(i));
  h.Advance(60'000);
  for (int i = 1000; i < 2000; ++i) EXPECT_EQ(answers[i].get_future().get(), "");
}

}  // namespace
}  // namespace delayq::testing
