// Waiting reserves under mixed traffic, and time that steps.
//
// The first tests use a clock that never wakes the scheduler thread, so the only code that
// catches up with time is the operation under test: whatever that operation collects for a
// waiting reserve must reach it, on every way out of the operation (errors included).
#include <gtest/gtest.h>

#include <future>

#include "conformance/queue_conformance.h"
#include "store/embedded/engine_harness.h"

namespace delayq::testing {
namespace {

// A manual clock that tells no one when it moves: the scheduler thread sleeps on.
class QuietClock final : public Clock {
 public:
  int64_t NowUs() const override { return now_us_.load(); }
  int64_t MonoUs() const override { return now_us_.load(); }
  using Clock::RealTimeUntil;
  std::chrono::microseconds RealTimeUntil(int64_t wall_us, int64_t mono_us) const override {
    if (wall_us <= NowUs() || mono_us <= MonoUs()) return std::chrono::microseconds(0);
    return std::chrono::hours(1);
  }
  uint64_t AddListener(std::function<void()>) override { return 0; }
  void RemoveListener(uint64_t) override {}
  void AdvanceMs(int64_t ms) { now_us_ += ms * 1000; }

 private:
  std::atomic<int64_t> now_us_{kStartUs};
};

EnqueueRequest Job(std::string payload, std::optional<int64_t> delay_ms = std::nullopt) {
  EnqueueRequest r;
  r.payload = std::move(payload);
  r.when.delay_ms = delay_ms;
  return r;
}

using Answer = std::future<Result<std::vector<Delivery>>>;

Answer WaitFor(Queue& q, const std::string& queue, int64_t wait_ms, int32_t max = 1) {
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  Answer f = promise->get_future();
  q.ReserveAsync(queue, {max, wait_ms, std::nullopt},
                 [promise](Result<std::vector<Delivery>> r) { promise->set_value(std::move(r)); });
  return f;
}

// Awaits an answer that must come; the limit guards against a hang, it does not synchronise.
Result<std::vector<Delivery>> Await(Answer& f) {
  if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the waiting reserve was never answered";
    std::abort();
  }
  return f.get();
}

struct FailingCall {
  const char* name;
  // Runs a call that fails; `dead_id` is a dead job of queue "a", `held` a receipt of a job
  // that is reserved right now, `gone` the receipt of a job that was acked.
  std::function<bool(Queue&, const std::string& dead_id, const std::string& held, const std::string& gone)> run;
};

// Every call below fails after catching up with the clock. Before the operation guard, each of
// them dropped the answer it had collected for the waiting reserve: the reserve hung until the
// client gave up, and the job it had been handed sat reserved by no one until its lease ran out.
const FailingCall kFailingCalls[] = {
    {"ack on a queue that does not exist",
     [](Queue& q, auto&, auto& held, auto&) { return q.Ack("nope", held).code() == Code::kNotFound; }},
    {"ack of a receipt for a job that does not exist",
     [](Queue& q, auto&, auto&, auto& gone) { return q.Ack("a", gone).code() == Code::kNotFound; }},
    {"nack on a queue that does not exist",
     [](Queue& q, auto&, auto& held, auto&) {
       return q.Nack("nope", {held, std::nullopt, "", false}).code() == Code::kNotFound;
     }},
    {"nack of a receipt for a job that does not exist",
     [](Queue& q, auto&, auto&, auto& gone) {
       return q.Nack("a", {gone, std::nullopt, "", false}).code() == Code::kNotFound;
     }},
    {"nack with a retry beyond max_delay",
     [](Queue& q, auto&, auto& held, auto&) {
       return q.Nack("a", {held, int64_t{1} << 50, "", false}).code() == Code::kInvalidArgument;
     }},
    {"touch of a receipt for a job that does not exist",
     [](Queue& q, auto&, auto&, auto& gone) { return q.Touch("a", gone, std::nullopt).code() == Code::kNotFound; }},
    {"touch on a queue that does not exist",
     [](Queue& q, auto&, auto& held, auto&) { return q.Touch("nope", held, std::nullopt).code() == Code::kNotFound; }},
    {"get of a job that does not exist",
     [](Queue& q, auto&, auto&, auto&) {
       return q.Get("a", JobRef::ById("01ARZ3NDEKTSV4RRFFQ69G5FAV")).code() == Code::kNotFound;
     }},
    {"get on a queue that does not exist",
     [](Queue& q, auto&, auto&, auto&) { return q.Get("nope", JobRef::ByKey("k")).code() == Code::kNotFound; }},
    {"cancel of a reserved job",
     [](Queue& q, auto&, auto& held, auto&) {
       return q.Cancel("a", JobRef::ById(held.substr(0, 26))).code() == Code::kConflict;
     }},
    {"cancel on a queue that does not exist",
     [](Queue& q, auto&, auto&, auto&) { return q.Cancel("nope", JobRef::ByKey("k")).code() == Code::kNotFound; }},
    {"reschedule of a dead job",
     [](Queue& q, auto& dead, auto&, auto&) {
       return q.Reschedule("a", JobRef::ById(dead), When{0, {}}).code() == Code::kConflict;
     }},
    {"enqueue with a delay beyond max_delay",
     [](Queue& q, auto&, auto&, auto&) {
       return q.Enqueue("a", Job("x", int64_t{1} << 50)).code() == Code::kInvalidArgument;
     }},
    {"enqueue replacing a reserved job",
     [](Queue& q, auto&, auto&, auto&) {
       EnqueueRequest r = Job("y");
       r.key = "held";
       r.replace = true;
       return q.Enqueue("a", r).code() == Code::kConflict;
     }},
    {"stats of a queue that does not exist",
     [](Queue& q, auto&, auto&, auto&) { return q.Stats("nope").code() == Code::kNotFound; }},
    {"dead list of a queue that does not exist",
     [](Queue& q, auto&, auto&, auto&) { return q.ListDead("nope", 10).code() == Code::kNotFound; }},
    {"dead replay of a queue that does not exist",
     [](Queue& q, auto&, auto&, auto&) { return q.ReplayDead("nope", {}).code() == Code::kNotFound; }},
    {"dead purge of a queue that does not exist",
     [](Queue& q, auto&, auto&, auto&) { return q.PurgeDead("nope").code() == Code::kNotFound; }},
    {"schedule of a queue that does not exist",
     [](Queue& q, auto&, auto&, auto&) { return q.Schedule("nope", 60'000, 10).code() == Code::kNotFound; }},
};

TEST(EngineWaiters, EveryWayOutOfAnOperationAnswersTheWaitersItServed) {
  for (const FailingCall& call : kFailingCalls) {
    SCOPED_TRACE(call.name);
    auto clock = std::make_shared<QuietClock>();
    EngineHarness h(Durability::kNone, [&](EngineOptions& o) { o.clock = clock; });
    Queue& q = h.queue();
    // A dead job, and a reserved one holding the key "held".
    EnqueueRequest dies = Job("dies");
    dies.max_attempts = 1;
    ASSERT_TRUE(q.Enqueue("a", dies).ok());
    auto d = q.Reserve("a", {});
    ASSERT_EQ(d->size(), 1u);
    ASSERT_TRUE(q.Nack("a", {(*d)[0].receipt, std::nullopt, "boom", false}).ok());
    EnqueueRequest held = Job("held");
    held.key = "held";
    ASSERT_TRUE(q.Enqueue("a", held).ok());
    auto h1 = q.Reserve("a", {1, 0, 3'600'000});
    ASSERT_EQ(h1->size(), 1u);
    ASSERT_TRUE(q.Enqueue("a", Job("acked")).ok());
    auto acked = q.Reserve("a", {});
    ASSERT_EQ(acked->size(), 1u);
    ASSERT_TRUE(q.Ack("a", (*acked)[0].receipt).ok());

    // A consumer waits; a job comes due while the scheduler sleeps.
    Answer waiting = WaitFor(q, "a", 60'000);
    ASSERT_TRUE(q.Enqueue("a", Job("due", 1000)).ok());
    clock->AdvanceMs(1000);
    EXPECT_TRUE(call.run(q, (*d)[0].id, (*h1)[0].receipt, (*acked)[0].receipt)) << "the call did not fail as planned";
    (void)q.Stats("a");  // a later call catches up too, in case the failing one did not

    auto got = Await(waiting);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].payload, "due");
    EXPECT_EQ(h.engine().Info().waiters, 0u);
  }
}

// Found in review when the waiters became a part of their own: waiters that time out in one tick
// were all taken out first, and then each one's provisional queue was dropped when "its" last
// waiter left: the first drop freed the queue the second still pointed at (AddressSanitizer:
// heap-use-after-free). Two workers long-polling a queue that does not exist yet, with the same
// wait, do just that.
TEST(EngineWaiters, WaitersOfOneProvisionalQueueThatTimeOutTogetherAreAllAnswered) {
  auto clock = std::make_shared<QuietClock>();
  EngineHarness h(Durability::kNone, [&](EngineOptions& o) { o.clock = clock; });
  for (int round = 0; round < 3; ++round) {
    std::vector<Answer> answers;
    for (int i = 0; i < 4; ++i) answers.push_back(WaitFor(h.queue(), "not-yet", 1'000));
    answers.push_back(WaitFor(h.queue(), "other-not-yet", 1'000));
    clock->AdvanceMs(1'001);
    ASSERT_TRUE(h.queue().Stats("elsewhere").code() == Code::kNotFound);  // an operation: it ticks
    for (Answer& a : answers) {
      auto got = Await(a);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_TRUE(got->empty());
    }
    auto queues = h.queue().ListQueues();
    ASSERT_TRUE(queues.ok());
    EXPECT_TRUE(queues->empty()) << "a provisional queue is never listed, and none is left";
  }
  // The names are free: a real queue is made by its first write.
  ASSERT_TRUE(h.queue().Enqueue("not-yet", Job("x")).ok());
  EXPECT_TRUE(h.queue().Stats("not-yet").ok());
}

TEST(EngineWaiters, WaitsAndLeasesRunOnTheMonotonicClockWhenTheWallClockSteps) {
  EngineHarness h;
  Queue& q = h.queue();
  // Stepped back an hour during a 3 s long-poll: the poll still ends after 3 s.
  Answer back = WaitFor(q, "a", 3000);
  h.clock().StepWallUs(-3'600'000'000LL);
  h.Advance(2999);
  EXPECT_EQ(back.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  h.Advance(1);
  auto r = Await(back);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());

  // A lease of 5 s neither ends when the wall clock jumps an hour ahead nor lasts an hour
  // longer when it jumps back.
  ASSERT_TRUE(q.Enqueue("a", Job("x")).ok());
  auto got = q.Reserve("a", {1, 0, 5000});
  ASSERT_EQ(got->size(), 1u);
  h.clock().StepWallUs(3'600'000'000LL);
  EXPECT_TRUE(q.Reserve("a", {})->empty()) << "the lease ended when the wall clock jumped";
  EXPECT_EQ(q.Stats("a")->reserved, 1);
  h.clock().StepWallUs(-3'600'000'000LL);
  h.Advance(5000);
  auto again = q.Reserve("a", {});
  ASSERT_EQ(again->size(), 1u) << "the lease did not end 5 s after it began";
  EXPECT_EQ((*again)[0].attempt, 2);
}

TEST(EngineWaiters, AWallClockStepWakesTheSchedulerAndDueTimesStayDates) {
  EngineHarness h;
  Queue& q = h.queue();
  auto late = q.Enqueue("a", Job("in 30 min", 30 * 60'000));
  ASSERT_TRUE(late.ok());
  // A poll that is already waiting gets the job when the wall clock steps past its due time.
  Answer waiting = WaitFor(q, "a", 60'000);
  h.clock().StepWallUs(3'600'000'000LL);
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, late->id);
  EXPECT_GE(h.NowMs(), (*got)[0].due_at_ms);
  ASSERT_TRUE(q.Ack("a", (*got)[0].receipt).ok());

  // Stepped back an hour: a job due in 10 s is due at that date, an hour of real time later,
  // never early.
  auto soon = q.Enqueue("a", Job("in 10 s", 10'000));
  ASSERT_TRUE(soon.ok());
  h.clock().StepWallUs(-3'600'000'000LL);
  h.Advance(10'000);
  EXPECT_TRUE(q.Reserve("a", {})->empty()) << "delivered before its due date";
  h.Advance(3'600'000);
  auto later = q.Reserve("a", {});
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ((*later)[0].id, soon->id);
}

TEST(EngineWaiters, ReopenTurnsAStoredLeaseDeadlineIntoTheTimeLeft) {
  EngineHarness h;
  ASSERT_TRUE(h.queue().Enqueue("a", Job("x")).ok());
  ASSERT_EQ(h.queue().Reserve("a", {1, 0, 10'000})->size(), 1u);
  h.Advance(4000);
  h.Reopen();
  h.Advance(5999);
  EXPECT_TRUE(h.queue().Reserve("a", {})->empty());
  h.Advance(1);
  EXPECT_EQ(h.queue().Reserve("a", {})->size(), 1u);
}

TEST(SystemClockTest, SleepsTowardsAWallClockDateAreCappedSoUnreportedStepsAreNoticed) {
  SystemClock clock;
  const int64_t in_an_hour = clock.NowUs() + 3'600'000'000LL;
  EXPECT_LE(clock.RealTimeUntil(in_an_hour).count(), SystemClock::kStepCheckUs);
  EXPECT_EQ(clock.RealTimeUntil(Clock::kNever, clock.MonoUs() - 1).count(), 0);
  EXPECT_GT(clock.RealTimeUntil(Clock::kNever, clock.MonoUs() + 3'600'000'000LL).count(), SystemClock::kStepCheckUs)
      << "monotonic deadlines are not capped: they cannot step";
}

TEST(EngineQueues, TheQueueLimitHolds) {
  EngineHarness h(Durability::kNone, [](EngineOptions& o) { o.max_queues = 3; });
  ExpectTheQueueLimitHolds(h.queue());
}

}  // namespace
}  // namespace delayq::testing
