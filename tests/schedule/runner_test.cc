// The schedule runner (schedule/runner.h) on its own: over the Queue of an embedded engine with a
// manual clock, and an in-memory ScheduleStore this test can write into as a server that died in
// the middle of a change would have left it.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "schedule/runner.h"
#include "schedule/scheduled_queue.h"
#include "store/embedded/engine_harness.h"

namespace delayq {
namespace {

// ScheduleStore in memory: the records and their generations, compare-and-set as every store does.
class MemoryScheduleStore final : public ScheduleStore {
 public:
  Result<std::optional<StoredSchedule>> LoadSchedule(std::string_view queue, std::string_view name) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find({std::string(queue), std::string(name)});
    if (it == rows_.end()) return std::optional<StoredSchedule>{};
    return std::optional(it->second);
  }
  Result<std::vector<StoredSchedule>> LoadSchedules(std::string_view queue) override {
    std::lock_guard lock(mu_);
    std::vector<StoredSchedule> out;
    for (const auto& [id, s] : rows_) {
      if (queue.empty() || id.first == queue) out.push_back(s);
    }
    return out;
  }
  Status StoreSchedule(const StoredSchedule& s, uint64_t expected) override {
    if (down) return Status::Unavailable("the store is unreachable");
    {
      std::lock_guard lock(mu_);
      auto& row = rows_[{s.queue, s.spec.name}];
      if (row.state.generation != expected) return Status::Conflict("changed");
      StoredSchedule stored = s;
      stored.state.generation = expected == 0 ? FirstGeneration() : expected + 1;
      row = std::move(stored);
    }
    if (after_store) std::exchange(after_store, nullptr)();
    return Status::Ok();
  }
  Status EraseSchedule(std::string_view queue, std::string_view name, uint64_t expected) override {
    std::lock_guard lock(mu_);
    auto it = rows_.find({std::string(queue), std::string(name)});
    if (it == rows_.end()) return Status::NotFound("gone");
    if (it->second.state.generation != expected) return Status::Conflict("changed");
    rows_.erase(it);
    return Status::Ok();
  }
  std::atomic<bool> down{false};      // writes fail while set (reads go on: the test's view)
  std::function<void()> after_store;  // once, after the next write: what happens before the writer goes on

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, StoredSchedule> rows_;
};

ScheduleSpec Hourly() {
  ScheduleSpec s;
  s.name = "hourly";
  s.every_ms = 3'600'000;
  s.payload = "1";
  return s;
}

int ComingRuns(Queue& q, const std::string& queue) {
  auto s = q.Stats(queue);
  return s.ok() ? static_cast<int>(s->scheduled) : -1;
}

// A pause (or delete, or replace) takes the coming runs off the schedule and then cancels their
// jobs. A server that died between the two left the jobs with nothing naming them: a deleted
// schedule's runs were then delivered (found by delayq-check's power cuts). Now the change names
// them first, and whoever writes the schedule next (a pass of any server, a delete) cancels them.
TEST(ScheduleRunner, RunsAChangeLeftUncancelledAreCancelledByTheNextWriter) {
  testing::EngineHarness h;
  MemoryScheduleStore store;
  const std::string queue = "reports";
  {
    ScheduleRunner runner(h.queue(), store, h.clock_ptr());
    auto put = runner.Put(queue, Hourly());
    ASSERT_TRUE(put.ok()) << put.status().ToString();
  }
  ASSERT_EQ(ComingRuns(h.queue(), queue), 1) << "the next run is a job";
  // What a server that died in the middle of a pause leaves: the state paused, its coming run
  // named as to be cancelled, its job still there.
  auto s = store.LoadSchedule(queue, "hourly");
  ASSERT_TRUE(s.ok() && *s);
  StoredSchedule died = **s;
  died.state.paused = true;
  died.state.cancelling = died.state.pending;
  died.state.pending.clear();
  ASSERT_FALSE(died.state.cancelling.empty());
  ASSERT_TRUE(store.StoreSchedule(died, died.state.generation).ok());
  ASSERT_EQ(ComingRuns(h.queue(), queue), 1) << "the job of the run the pause took off is still there";

  ScheduleRunner after(h.queue(), store, h.clock_ptr());  // another server, or this one restarted
  auto pass = after.Materialize(queue, "hourly");
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_FALSE(*pass) << "paused: nothing to run";
  EXPECT_EQ(ComingRuns(h.queue(), queue), 0) << "the next writer cancels what the change named";
  auto now = store.LoadSchedule(queue, "hourly");
  ASSERT_TRUE(now.ok() && *now);
  EXPECT_TRUE((*now)->state.cancelling.empty());

  // The same left by a dying delete is finished by the delete asked again.
  ASSERT_TRUE(after.SetPaused(queue, "hourly", false).ok());
  ASSERT_EQ(ComingRuns(h.queue(), queue), 1);
  now = store.LoadSchedule(queue, "hourly");
  StoredSchedule dying = **now;
  dying.state.paused = true;
  dying.state.cancelling = dying.state.pending;
  dying.state.pending.clear();
  ASSERT_TRUE(store.StoreSchedule(dying, dying.state.generation).ok());
  ASSERT_TRUE(after.Delete(queue, "hourly").ok());
  EXPECT_EQ(ComingRuns(h.queue(), queue), 0);
  EXPECT_FALSE(*store.LoadSchedule(queue, "hourly"));
}

// A replace that shares run keys with the revision it replaced keeps the new revision's jobs:
// cancelling the old runs by key must not cancel the new ones.
TEST(ScheduleRunner, AReplaceKeepsTheNewRevisionsRunsThatShareAKeyWithTheOld) {
  testing::EngineHarness h;
  MemoryScheduleStore store;
  ScheduleRunner runner(h.queue(), store, h.clock_ptr());
  const std::string queue = "reports";
  ASSERT_TRUE(runner.Put(queue, Hourly()).ok());
  ScheduleSpec again = Hourly();
  again.payload = "2";  // the same runs, another payload
  auto put = runner.Put(queue, again);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto job = h.queue().Get(queue, JobRef::ByKey(OccurrenceKey("hourly", put->next_runs[0])));
  ASSERT_TRUE(job.ok()) << "the replaced schedule's next run is a job: " << job.status().ToString();
  EXPECT_EQ(job->payload, "2");
  EXPECT_EQ(ComingRuns(h.queue(), queue), 1);
}

// The engine's Queue, where the run at `at` is delivered and acked (its key freed) as the first
// call of a pass reaches the store: what a loaded machine does when a pass plans just before a
// run comes due.
class DeliveredDuringThePass final : public ForwardingQueue<Queue> {
 public:
  DeliveredDuringThePass(testing::EngineHarness& h, std::string queue, int64_t at)
      : ForwardingQueue<Queue>(h.queue()), h_(h), queue_(std::move(queue)), at_(at) {}
  Result<Job> Get(std::string_view q, const JobRef& ref) override {
    DeliverTheRun();
    return inner().Get(q, ref);
  }
  Result<std::vector<EnqueueResult>> EnqueueBatch(std::string_view q, std::span<const EnqueueRequest> r) override {
    DeliverTheRun();
    return inner().EnqueueBatch(q, r);
  }
  bool armed = false;
  int delivered = 0;

 private:
  void DeliverTheRun() {
    if (!armed) return;
    armed = false;
    h_.clock().SetUs(at_ * 1000);
    ReserveRequest all;
    all.max = 100;
    auto got = inner().Reserve(queue_, all);  // the run, and those before it
    if (!got.ok()) return;
    for (const Delivery& d : *got) {
      if (inner().Ack(queue_, d.receipt).ok() && d.due_at_ms == at_) ++delivered;
    }
  }
  testing::EngineHarness& h_;
  std::string queue_;
  int64_t at_;
};

// Puts a schedule "tick" every second; answers its last listed run (claimed and made, 5 s on).
int64_t PutEverySecond(ScheduleRunner& runner, const std::string& queue) {
  ScheduleSpec s;
  s.name = "tick";
  s.every_ms = 1'000;
  s.payload = "1";
  auto put = runner.Put(queue, s);
  if (!put.ok() || put->next_runs.empty()) ADD_FAILURE() << put.status().ToString();
  return put.ok() && !put->next_runs.empty() ? put->next_runs.back() : 0;
}

// A put stores the schedule, then its own pass makes the coming runs. On a busy machine that pass
// began after the first run had come due (CI saw it on PostgreSQL: the run was made as a missed
// one, and with misfire skip it would have been lost). It is made, late, keyed by its moment.
TEST(ScheduleRunner, ARunThatComesDueBetweenAPutAndItsPassIsMadeNotSkipped) {
  testing::EngineHarness h;
  MemoryScheduleStore store;
  const std::string queue = "ticks";
  ScheduleRunner runner(h.queue(), store, h.clock_ptr());
  h.clock().SetUs(1'796'567'809'900'000);  // 100 ms before a second's run
  const int64_t at = 1'796'567'810'000;
  store.after_store = [&h] { h.clock().SetUs(1'796'567'810'020'000); };  // the pass begins 20 ms after it
  ScheduleSpec s;
  s.name = "tick";
  s.every_ms = 1'000;
  s.payload = "1";
  s.misfire = Misfire::kSkip;
  auto put = runner.Put(queue, s);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto made = h.queue().Get(queue, JobRef::ByKey(OccurrenceKey("tick", at)));
  ASSERT_TRUE(made.ok()) << "the run that came due before the put's pass: " << made.status().ToString();
  EXPECT_LE(made->due_at_ms, at + 20) << "due at once";
  EXPECT_TRUE(h.queue().Get(queue, JobRef::ByKey(OccurrenceKey("tick", at + 1'000))).ok()) << "and the next one";
}

// A pass makes the runs an earlier pass claimed only if they were never made: one that came due
// while the pass ran may have been delivered and acked, and making it "again" delivered it twice
// (CI's make test saw ScheduledRunsAreDeliveredOnceEachAtTheirTime do it). Here the run is
// delivered and acked as the pass's first call reaches the store.
TEST(ScheduleRunner, AClaimedRunDeliveredWhileAPassRunsIsNotMadeAgain) {
  testing::EngineHarness h;
  MemoryScheduleStore store;
  const std::string queue = "ticks";
  ScheduleRunner putting(h.queue(), store, h.clock_ptr());
  const int64_t at = PutEverySecond(putting, queue);  // still to come when the pass plans
  h.clock().SetUs((at - 1'500) * 1000);

  DeliveredDuringThePass racing(h, queue, at);
  racing.armed = true;
  ScheduleRunner runner(racing, store, h.clock_ptr());
  auto pass = runner.Materialize(queue, "tick");
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  ASSERT_EQ(racing.delivered, 1) << "the run was delivered and acked during the pass";
  auto again = h.queue().Get(queue, JobRef::ByKey(OccurrenceKey("tick", at)));
  EXPECT_EQ(again.status().code(), Code::kNotFound) << "the acked run was made into a second job";
}

// What the look is for: a run a pass claimed and died before making is made by the next pass.
TEST(ScheduleRunner, AClaimedRunThatWasNeverMadeIsMadeByTheNextPass) {
  testing::EngineHarness h;
  MemoryScheduleStore store;
  const std::string queue = "ticks";
  ScheduleRunner runner(h.queue(), store, h.clock_ptr());
  const int64_t at = PutEverySecond(runner, queue);
  ASSERT_TRUE(h.queue().Cancel(queue, JobRef::ByKey(OccurrenceKey("tick", at))).ok()) << "as if never made";
  auto pass = runner.Materialize(queue, "tick");
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  auto made = h.queue().Get(queue, JobRef::ByKey(OccurrenceKey("tick", at)));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->due_at_ms, at);
}

// The store goes away in the middle of a replace: the change is stored, then its cancels of the
// old revision's coming jobs fail, and so does every write until the store is back. The old jobs
// come due meanwhile and are delivered. The new revision must not make those moments again as
// missed runs (delayq-check on PostgreSQL saw one moment delivered twice across a restart: the
// old revision's job, then the new revision's run_once misfire).
class StoreGoesAway final : public ForwardingQueue<Queue> {
 public:
  StoreGoesAway(Queue& inner, MemoryScheduleStore& store) : ForwardingQueue<Queue>(inner), store_(store) {}
  Status Cancel(std::string_view q, const JobRef& ref) override {
    if (!armed && !store_.down) return inner().Cancel(q, ref);
    armed = false;
    store_.down = true;  // from this cancel on, until the test brings it back
    return Status::Unavailable("the store closed the connection");
  }
  bool armed = false;

 private:
  MemoryScheduleStore& store_;
};

TEST(ScheduleRunner, RunsAChangeCouldNotCancelBeforeTheyCameDueAreNotMadeAgain) {
  testing::EngineHarness h;
  MemoryScheduleStore store;
  StoreGoesAway flaky(h.queue(), store);
  const std::string queue = "ticks";
  ScheduleRunner runner(flaky, store, h.clock_ptr());
  const int64_t last = PutEverySecond(runner, queue);  // runs made up to `last`
  flaky.armed = true;
  ScheduleSpec again;
  again.name = "tick";
  again.every_ms = 1'000;
  again.payload = "2";
  ASSERT_TRUE(runner.Put(queue, again).ok()) << "the replace is stored; its cancels are left to the next writer";
  h.clock().SetUs((last + 500) * 1000);  // every old run came due while the store was away
  ReserveRequest all;
  all.max = 100;
  auto delivered = h.queue().Reserve(queue, all);
  ASSERT_TRUE(delivered.ok());
  ASSERT_FALSE(delivered->empty());
  std::vector<std::string> keys;
  for (const Delivery& d : *delivered) {
    ASSERT_TRUE(h.queue().Ack(queue, d.receipt).ok());
    keys.push_back(d.key);
  }
  store.down = false;  // back
  auto pass = runner.Materialize(queue, "tick");
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  for (const std::string& key : keys) {
    auto twice = h.queue().Get(queue, JobRef::ByKey(key));
    EXPECT_EQ(twice.status().code(), Code::kNotFound) << key << " was delivered, then made again";
  }
  auto next = h.queue().Get(queue, JobRef::ByKey(OccurrenceKey("tick", last + 1'000)));
  ASSERT_TRUE(next.ok()) << "the new revision goes on from there: " << next.status().ToString();
  EXPECT_EQ(next->payload, "2");
}

// A store that keeps jobs and nothing else: what a new store is before it gets schedules.
class JobsOnly final : public ForwardingQueue<Queue> {
 public:
  using ForwardingQueue<Queue>::ForwardingQueue;
  Result<RecurringSchedule> PutSchedule(std::string_view q, const ScheduleSpec& spec) override {
    return Queue::PutSchedule(q, spec);
  }
  Status SetConfig(std::string_view q, const QueueConfig& c) override {
    ++configs_set;
    return inner().SetConfig(q, c);
  }
  int configs_set = 0;
};

// A store gets recurring schedules by keeping their rows (ScheduleStore): ScheduledQueue does the
// rest, on the clock it is given, and checks a config change against the schedules first.
TEST(ScheduledQueue, GivesAStoreThatKeepsTheRowsEveryScheduleCall) {
  testing::EngineHarness h;
  MemoryScheduleStore rows;
  auto jobs_only = std::make_unique<JobsOnly>(h.queue());
  JobsOnly* store = jobs_only.get();
  EXPECT_EQ(store->PutSchedule("reports", Hourly()).code(), Code::kInternal) << "no schedules of its own";
  ScheduledQueue<Queue> scheduled(std::move(jobs_only), rows, h.clock_ptr());
  auto put = scheduled.PutSchedule("reports", Hourly());
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->next_runs.front(), (h.clock().NowUs() / 1000 / 3'600'000 + 1) * 3'600'000) << "on the given clock";
  EXPECT_EQ(ComingRuns(h.queue(), "reports"), 1) << "its next run is a job in the store";
  ASSERT_TRUE(scheduled.ListSchedules("reports").ok());
  EXPECT_EQ(scheduled.ListSchedules("reports")->size(), 1u);
  ASSERT_TRUE(scheduled.PauseSchedule("reports", "hourly", true).ok());
  EXPECT_EQ(ComingRuns(h.queue(), "reports"), 0);

  QueueConfig tiny;
  tiny.max_payload = 0;  // out of range: refused as the request, before the schedules are read
  EXPECT_EQ(scheduled.SetConfig("reports", tiny).code(), Code::kInvalidArgument);
  ScheduleSpec big = Hourly();
  big.name = "big";
  big.payload = std::string(2'000, 'x');
  ASSERT_TRUE(scheduled.PutSchedule("reports", big).ok());
  QueueConfig smaller;
  smaller.max_payload = 1'000;  // would refuse the big schedule's runs
  EXPECT_EQ(scheduled.SetConfig("reports", smaller).code(), Code::kConflict);
  EXPECT_EQ(store->configs_set, 0) << "refused before the store saw it";
  ASSERT_TRUE(scheduled.DeleteSchedule("reports", "big").ok());
  EXPECT_TRUE(scheduled.SetConfig("reports", smaller).ok());
  EXPECT_EQ(store->configs_set, 1);
}

}  // namespace
}  // namespace delayq
