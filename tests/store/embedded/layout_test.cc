// One row per scheduled job (store/embedded/keys.h): a job made here is one due entry holding
// its record until it moves; then its record is in `jobs`. These tests look at the rows
// themselves, through the storage under the engine, and check that every way in and out of both
// layouts reads the right record and leaves no row behind.
#include <gtest/gtest.h>

#include <map>

#include "store/embedded/engine_harness.h"

namespace delayq::testing {
namespace {

EnqueueRequest Job(std::string payload, int64_t delay_ms) {
  EnqueueRequest r;
  r.payload = std::move(payload);
  r.when.delay_ms = delay_ms;
  return r;
}

class EngineLayout : public ::testing::Test {
 protected:
  EngineHarness h_;
  Engine& q() { return h_.engine(); }

  // Rows of `cf` (every queue).
  size_t Rows(Cf cf) {
    size_t n = 0;
    auto cursor = h_.faults().Scan(cf, "", std::string(64, '\xff'));
    for (; cursor->Valid(); cursor->Next()) ++n;
    EXPECT_TRUE(cursor->status().ok());
    return n;
  }
  bool HasJobsRow(const std::string& id) {
    std::string raw;
    return h_.faults().Get(Cf::kJobs, Ulid::Parse(id)->Raw(), &raw).ok();
  }
  // The due entry of job `id` (the only one in the store): its decoded fields.
  DueRecord OnlyDueEntry(std::string* value) {
    auto cursor = h_.faults().Scan(Cf::kDue, "", std::string(64, '\xff'));
    EXPECT_TRUE(cursor->Valid());
    DueRecord due;
    if (!cursor->Valid()) return due;
    *value = std::string(cursor->value());
    EXPECT_TRUE(DecodeDueRecord(*value, &due).ok());
    return due;
  }
  Delivery ReserveOne(int64_t lease_ms = 30'000) {
    auto got = q().Reserve("q", {.max = 1, .lease_ms = lease_ms});
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got.ok() ? got->size() : 0, 1u);
    return got.ok() && !got->empty() ? got->front() : Delivery{};
  }
};

TEST_F(EngineLayout, AScheduledJobIsOneRowUntilItMoves) {
  auto job = q().Enqueue("q", Job(R"({"n":1})", 60'000));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(Rows(Cf::kJobs), 0u) << "a new job is its due entry only";
  std::string value;
  EXPECT_FALSE(OnlyDueEntry(&value).record.empty());
  EXPECT_EQ(value[0], 3) << "due entry version 3: with the record";
  auto got = q().Get("q", JobRef::ById(job->id));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->payload, R"({"n":1})");
  EXPECT_EQ(got->state, JobState::kScheduled);

  h_.Advance(60'000);
  Delivery d = ReserveOne();
  EXPECT_EQ(d.payload, R"({"n":1})");
  EXPECT_EQ(Rows(Cf::kJobs), 0u) << "a reserve rewrites the one row";
  DueRecord due = OnlyDueEntry(&value);
  EXPECT_EQ(due.attempt, 1);
  EXPECT_NE(due.lease_deadline_ms, 0);
  ASSERT_TRUE(q().Touch("q", d.receipt, 90'000).ok());
  due = OnlyDueEntry(&value);
  EXPECT_FALSE(due.record.empty()) << "a touch keeps the record";
  EXPECT_EQ(due.lease_deadline_ms, h_.NowMs() + 90'000);
  EXPECT_EQ(q().Get("q", JobRef::ById(job->id))->payload, R"({"n":1})");

  // A retry moves it: its record goes to `jobs`, its new entry has none.
  auto nacked = q().Nack("q", {d.receipt, 10'000, "later", false});
  ASSERT_TRUE(nacked.ok()) << nacked.status().ToString();
  EXPECT_TRUE(HasJobsRow(job->id));
  EXPECT_TRUE(OnlyDueEntry(&value).record.empty());
  EXPECT_EQ(value[0], 2);
  h_.Advance(10'000);
  Delivery again = ReserveOne();
  EXPECT_EQ(again.payload, R"({"n":1})");
  EXPECT_EQ(again.attempt, 2);
  ASSERT_TRUE(q().Ack("q", again.receipt).ok());
  EXPECT_EQ(Rows(Cf::kJobs), 0u);
  EXPECT_EQ(Rows(Cf::kDue), 0u);
}

// A job whose retry lands in the bucket it was made in is back at its id's place, but with its
// record in `jobs`: every read must find it there, and its end must delete both rows.
TEST_F(EngineLayout, AJobMovedBackToItsIdsPlaceIsReadFromJobs) {
  auto job = q().Enqueue("q", Job("back", 0));
  ASSERT_TRUE(job.ok());
  Delivery d = ReserveOne();
  ASSERT_TRUE(q().Nack("q", {d.receipt, 0, "again", false}).ok());
  EXPECT_TRUE(HasJobsRow(job->id));
  std::string value;
  EXPECT_TRUE(OnlyDueEntry(&value).record.empty());
  auto got = q().Get("q", JobRef::ById(job->id));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->payload, "back");
  EXPECT_EQ(got->last_error, "again");
  auto page = q().ListJobs("q", {.state = JobState::kReady});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 1u);
  EXPECT_EQ(page->jobs[0].payload, "back");
  Delivery again = ReserveOne();
  EXPECT_EQ(again.payload, "back");
  ASSERT_TRUE(q().Touch("q", again.receipt, 60'000).ok());
  EXPECT_TRUE(OnlyDueEntry(&value).record.empty()) << "a touch does not copy a record into its entry";
  ASSERT_TRUE(q().Ack("q", again.receipt).ok());
  EXPECT_EQ(Rows(Cf::kJobs), 0u);
  EXPECT_EQ(Rows(Cf::kDue), 0u);
}

TEST_F(EngineLayout, ALargeRecordStaysInJobs) {
  const std::string big(kInlineRecordMaxBytes, 'x');
  auto job = q().Enqueue("q", Job('"' + big + '"', 0));
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE(HasJobsRow(job->id));
  std::string value;
  EXPECT_TRUE(OnlyDueEntry(&value).record.empty());
  EXPECT_LT(value.size(), 64u) << "a reserve rewrites a few bytes";
  Delivery d = ReserveOne();
  EXPECT_EQ(d.payload.size(), big.size() + 2);
  ASSERT_TRUE(q().Ack("q", d.receipt).ok());
  EXPECT_EQ(Rows(Cf::kJobs), 0u);
  EXPECT_EQ(Rows(Cf::kDue), 0u);
}

// Every way a job leaves, from both layouts, leaves no row; dead jobs keep theirs in `jobs`
// until purged.
TEST_F(EngineLayout, EveryEndLeavesNoRowInEitherLayout) {
  std::map<std::string, std::string> ids;
  for (const char* name : {"cancel", "cancel-moved", "reschedule", "replace", "dead", "expire"}) {
    EnqueueRequest r = Job(std::string("\"") + name + '"', 0);
    r.key = name;
    r.max_attempts = 1;
    auto job = q().Enqueue("q", r);
    ASSERT_TRUE(job.ok());
    ids[name] = job->id;
  }
  EXPECT_EQ(Rows(Cf::kJobs), 0u);
  ASSERT_TRUE(q().Reschedule("q", JobRef::ByKey("cancel-moved"), When{.delay_ms = 20'000}).ok());
  ASSERT_TRUE(q().Reschedule("q", JobRef::ByKey("reschedule"), When{.delay_ms = 8'000}).ok());
  EnqueueRequest replacement = Job(R"("replaced")", 9'000);
  replacement.key = "replace";
  replacement.replace = true;
  auto replaced = q().Enqueue("q", replacement);
  ASSERT_TRUE(replaced.ok());
  EXPECT_TRUE(replaced->replaced);
  EXPECT_TRUE(HasJobsRow(ids["reschedule"]));
  EXPECT_TRUE(HasJobsRow(ids["replace"]));
  ASSERT_TRUE(q().Cancel("q", JobRef::ByKey("cancel")).ok());
  ASSERT_TRUE(q().Cancel("q", JobRef::ById(ids["cancel-moved"])).ok());
  EXPECT_FALSE(HasJobsRow(ids["cancel-moved"]));
  // Two ready ("dead", "expire"): one nacked dead, one whose only lease runs out.
  auto got = q().Reserve("q", {.max = 2, .lease_ms = 1'000});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  for (const Delivery& d : *got) {
    if (d.id == ids["dead"]) {
      ASSERT_TRUE(q().Nack("q", {d.receipt, std::nullopt, "boom", true}).ok());
    }
  }
  h_.Advance(1'000);
  auto stats = q().Stats("q");  // runs the tick: the lease ran out on the last attempt
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->dead, 2);
  EXPECT_EQ(Rows(Cf::kJobs), 4u) << "two dead, two moved";
  auto dead = q().Get("q", JobRef::ById(ids["expire"]));
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->state, JobState::kDead);
  EXPECT_EQ(dead->payload, R"("expire")");
  h_.Advance(9'000);
  auto rest = q().Reserve("q", {.max = 10});
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  for (const Delivery& d : *rest) ASSERT_TRUE(q().Ack("q", d.receipt).ok());
  EXPECT_EQ(Rows(Cf::kDue), 0u);
  EXPECT_EQ(Rows(Cf::kJobs), 2u);
  auto purged = q().PurgeDead("q");
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 2);
  EXPECT_EQ(Rows(Cf::kJobs), 0u);
  EXPECT_EQ(Rows(Cf::kDead), 0u);
}

// Both layouts, in every state, come back after a restart with their records and leases.
TEST_F(EngineLayout, BothLayoutsSurviveARestartInEveryState) {
  const std::string big = '"' + std::string(kInlineRecordMaxBytes, 'b') + '"';
  auto inline_reserved = q().Enqueue("q", Job("1", 0));
  auto big_reserved = q().Enqueue("q", Job(big, 0));
  ASSERT_TRUE(inline_reserved.ok() && big_reserved.ok());
  auto got = q().Reserve("q", {.max = 2, .lease_ms = 60'000});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  auto inline_ready = q().Enqueue("q", Job("2", 0));
  auto inline_scheduled = q().Enqueue("q", Job("3", 3'600'000));
  auto moved = q().Enqueue("q", Job("4", 3'600'000));
  ASSERT_TRUE(inline_ready.ok() && inline_scheduled.ok() && moved.ok());
  ASSERT_TRUE(q().Reschedule("q", JobRef::ById(moved->id), When{.delay_ms = 7'200'000}).ok());
  h_.Reopen();
  auto check = [&](const std::string& id, JobState state, const std::string& payload) {
    auto job = q().Get("q", JobRef::ById(id));
    ASSERT_TRUE(job.ok()) << id << ": " << job.status().ToString();
    EXPECT_EQ(job->state, state) << id;
    EXPECT_EQ(job->payload, payload) << id;
  };
  check(inline_reserved->id, JobState::kReserved, "1");
  check(big_reserved->id, JobState::kReserved, big);
  check(inline_ready->id, JobState::kReady, "2");
  check(inline_scheduled->id, JobState::kScheduled, "3");
  check(moved->id, JobState::kScheduled, "4");
  // The receipts of before the restart still ack, in both layouts.
  for (const Delivery& d : *got) ASSERT_TRUE(q().Ack("q", d.receipt).ok());
  h_.Advance(7'200'000);
  auto rest = q().Reserve("q", {.max = 10});
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->size(), 3u);
  for (const Delivery& d : *rest) ASSERT_TRUE(q().Ack("q", d.receipt).ok());
  EXPECT_EQ(Rows(Cf::kJobs), 0u);
  EXPECT_EQ(Rows(Cf::kDue), 0u);
}

// An id is looked up in its queue only, and a made-up id tagged with a bucket that holds jobs
// finds none of them.
TEST_F(EngineLayout, AForgedOrForeignIdFindsNoJob) {
  auto job = q().Enqueue("q", Job("mine", 60'000));
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(q().Enqueue("other", Job("x", 0)).ok());
  EXPECT_EQ(q().Get("other", JobRef::ById(job->id)).status().code(), Code::kNotFound);
  EXPECT_EQ(q().Cancel("other", JobRef::ById(job->id)).code(), Code::kNotFound);
  Ulid forged = *Ulid::Parse(job->id);
  forged.bytes[11] ^= 1;  // same millisecond and tag, another id
  EXPECT_EQ(q().Get("q", JobRef::ById(forged.ToString())).status().code(), Code::kNotFound);
  EXPECT_EQ(q().Cancel("q", JobRef::ById(forged.ToString())).code(), Code::kNotFound);
  auto replay = q().ReplayDead("q", std::vector<std::string>{job->id, forged.ToString()});
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(*replay, 0) << "a live job is not dead";
  EXPECT_EQ(q().Get("q", JobRef::ById(job->id))->payload, "mine");
}

// A failed write leaves a job in the layout it was in: a reserve of an inline job whose write
// fails changes nothing, and the next one reads it whole.
TEST_F(EngineLayout, AFailedWriteLeavesTheRowAsItWas) {
  auto job = q().Enqueue("q", Job("kept", 0));
  ASSERT_TRUE(job.ok());
  std::string before;
  OnlyDueEntry(&before);
  h_.faults().FailWrites(1);
  EXPECT_EQ(q().Reserve("q", {.max = 1}).code(), Code::kIoError);
  std::string after;
  OnlyDueEntry(&after);
  EXPECT_EQ(before, after);
  Delivery d = ReserveOne();
  EXPECT_EQ(d.payload, "kept");
  ASSERT_TRUE(q().Ack("q", d.receipt).ok());
  EXPECT_EQ(Rows(Cf::kDue), 0u);
}

}  // namespace
}  // namespace delayq::testing
