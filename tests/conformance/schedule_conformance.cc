// The conformance suite, recurring schedules (delayq/schedule.h) on every store: a schedule's next
// runs exist as jobs with their keys and header; runs are delivered once each at their time;
// pause, resume, replace and delete cancel what is not yet due; bad schedules are refused and
// change nothing; runs missed while no server ran follow the misfire rule, across a restart.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <thread>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

ScheduleSpec Every(std::string name, int64_t every_ms, Misfire misfire = Misfire::kRunOnce) {
  ScheduleSpec s;
  s.name = std::move(name);
  s.every_ms = every_ms;
  s.payload = R"({"report":"daily"})";
  s.headers = {{"team", "billing"}};
  s.misfire = misfire;
  return s;
}

std::string KeyOf(const std::string& name, int64_t at) { return "schedule:" + name + ":" + std::to_string(at); }

// Polls `done` while a store's own threads do their part (the schedule runner, a real clock).
template <class Pred>
bool Eventually(Pred done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace

TEST_P(QueueConformance, AScheduleKeepsItsNextRunAJobWithItsKeyAndHeader) {
  const std::string queue = QueueName();
  const int64_t before = h_->NowMs();
  auto put = q().PutSchedule(queue, Every("report", 3'600'000));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->spec.name, "report");
  EXPECT_FALSE(put->paused);
  ASSERT_EQ(put->next_runs.size(), 5u);
  EXPECT_GT(put->next_runs[0], before);
  EXPECT_LE(put->next_runs[0], before + 3'600'000 + 5'000);
  for (size_t i = 1; i < put->next_runs.size(); ++i) EXPECT_EQ(put->next_runs[i] - put->next_runs[i - 1], 3'600'000);

  auto job = q().Get(queue, JobRef::ByKey(KeyOf("report", put->next_runs[0])));
  ASSERT_TRUE(job.ok()) << "the next run is a job already: " << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kScheduled);
  EXPECT_EQ(job->due_at_ms, put->next_runs[0]);
  EXPECT_EQ(job->payload, R"({"report":"daily"})");
  EXPECT_EQ(job->headers.at("delayq-schedule"), "report");
  EXPECT_EQ(job->headers.at("team"), "billing");

  auto got = q().GetSchedule(queue, "report");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->spec, put->spec);
  EXPECT_EQ(got->next_runs, put->next_runs);
  EXPECT_FALSE(got->last_run_at_ms) << "nothing ran yet";
  auto list = q().ListSchedules(queue);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].spec.name, "report");

  ASSERT_TRUE(q().DeleteSchedule(queue, "report").ok());
  EXPECT_EQ(q().GetSchedule(queue, "report").code(), Code::kNotFound);
  EXPECT_EQ(q().Get(queue, JobRef::ByKey(KeyOf("report", put->next_runs[0]))).code(), Code::kNotFound)
      << "its coming job is cancelled";
  EXPECT_TRUE(q().ListSchedules(queue)->empty());
  EXPECT_EQ(q().DeleteSchedule(queue, "report").code(), Code::kNotFound);
  EXPECT_TRUE(q().ListSchedules(QueueName())->empty()) << "a queue without schedules lists none";
}

TEST_P(QueueConformance, ScheduledRunsAreDeliveredOnceEachAtTheirTime) {
  const std::string queue = QueueName();
  auto put = q().PutSchedule(queue, Every("tick", 1'000));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  std::map<std::string, int64_t> runs;  // key -> due
  int duplicates = 0, early = 0;
  for (int step = 0; step < 400 && runs.size() < 4; ++step) {
    h_->Advance(h_->exact_time() ? 1'000 : 100);
    auto got = MustReserve(q(), queue, 10);
    const int64_t now = h_->NowMs();
    for (const auto& d : got) {
      if (d.due_at_ms > now) ++early;
      if (!runs.emplace(d.key, d.due_at_ms).second) ++duplicates;
      ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
    }
  }
  ASSERT_GE(runs.size(), 4u);
  EXPECT_EQ(duplicates, 0);
  EXPECT_EQ(early, 0);
  // Consecutive seconds, each job keyed by its occurrence and due then; or, when a busy machine
  // began the put's own pass after the first one (CI saw 20 ms), due as that pass made it: a past
  // moment is due at once (SPEC: deliver_at in the past).
  std::set<int64_t> occurrences;
  for (const auto& [key, due] : runs) {
    const int64_t at = std::stoll(key.substr(key.rfind(':') + 1));
    EXPECT_EQ(key, KeyOf("tick", at));
    EXPECT_GE(due, at) << key;
    EXPECT_LT(due - at, 1'000) << key;
    occurrences.insert(at);
  }
  for (auto it = std::next(occurrences.begin()); it != occurrences.end(); ++it) {
    EXPECT_EQ(*it - *std::prev(it), 1'000);
  }
  auto after = q().GetSchedule(queue, "tick");
  ASSERT_TRUE(after.ok());
  ASSERT_TRUE(after->last_run_at_ms.has_value());
  EXPECT_GE(*after->last_run_at_ms, *occurrences.rbegin());
}

TEST_P(QueueConformance, PauseCancelsTheComingJobsAndResumeRunsFromNow) {
  const std::string queue = QueueName();
  auto put = q().PutSchedule(queue, Every("hourly", 3'600'000));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  const std::string first = KeyOf("hourly", put->next_runs[0]);
  ASSERT_TRUE(q().Get(queue, JobRef::ByKey(first)).ok());
  auto paused = q().PauseSchedule(queue, "hourly", true);
  ASSERT_TRUE(paused.ok()) << paused.status().ToString();
  EXPECT_TRUE(paused->paused);
  EXPECT_TRUE(paused->next_runs.empty()) << "a paused schedule has no next run";
  EXPECT_EQ(q().Get(queue, JobRef::ByKey(first)).code(), Code::kNotFound) << "its coming job is cancelled";
  EXPECT_TRUE(q().PauseSchedule(queue, "hourly", true).ok()) << "pausing twice is fine";
  auto resumed = q().PauseSchedule(queue, "hourly", false);
  ASSERT_TRUE(resumed.ok());
  EXPECT_FALSE(resumed->paused);
  ASSERT_FALSE(resumed->next_runs.empty());
  EXPECT_TRUE(q().Get(queue, JobRef::ByKey(KeyOf("hourly", resumed->next_runs[0]))).ok()) << "a job again";
  EXPECT_EQ(q().PauseSchedule(queue, "nope", true).code(), Code::kNotFound);
}

TEST_P(QueueConformance, ReplacingAScheduleCancelsTheJobsOfTheOldOne) {
  const std::string queue = QueueName();
  auto hourly = q().PutSchedule(queue, Every("report", 3'600'000));
  ASSERT_TRUE(hourly.ok()) << hourly.status().ToString();
  ScheduleSpec yearly;
  yearly.name = "report";
  yearly.cron = "0 0 1 1 *";
  yearly.timezone = "Europe/Berlin";
  auto replaced = q().PutSchedule(queue, yearly);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->spec.cron, "0 0 1 1 *");
  EXPECT_EQ(replaced->created_at_ms, hourly->created_at_ms) << "the same schedule, changed";
  EXPECT_EQ(q().Get(queue, JobRef::ByKey(KeyOf("report", hourly->next_runs[0]))).code(), Code::kNotFound);
  auto job = q().Get(queue, JobRef::ByKey(KeyOf("report", replaced->next_runs[0])));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->payload, "null") << "no payload given: JSON null";
  EXPECT_EQ(q().ListSchedules(queue)->size(), 1u);
}

TEST_P(QueueConformance, BadSchedulesAreRefusedAndChangeNothing) {
  const std::string queue = QueueName();
  auto spec = [](auto change) {
    ScheduleSpec s = Every("s", 60'000);
    change(s);
    return s;
  };
  struct Case {
    ScheduleSpec spec;
    Code code;
    std::string mention;
  } cases[] = {
      {spec([](ScheduleSpec& s) {
         s.cron = "61 * * * *";
         s.every_ms = 0;
       }),
       Code::kInvalidArgument, "minute"},
      {spec([](ScheduleSpec& s) { s.cron = "* * * * *"; }), Code::kInvalidArgument, "exactly one of cron"},
      {spec([](ScheduleSpec& s) { s.every_ms = 5; }), Code::kInvalidArgument, "every"},
      {spec([](ScheduleSpec& s) { s.timezone = "Nowhere/Land"; }), Code::kInvalidArgument, "timezone"},
      {spec([](ScheduleSpec& s) { s.name = "a b"; }), Code::kInvalidArgument, "schedule name"},
      {spec([](ScheduleSpec& s) { s.max_attempts = 0; }), Code::kInvalidArgument, "max_attempts"},
      {spec([](ScheduleSpec& s) {
         s.payload = std::string(2 << 20, 'x');
         s.binary = true;
       }),
       Code::kTooLarge, "max_payload"},
  };
  for (const auto& c : cases) {
    auto r = q().PutSchedule(queue, c.spec);
    EXPECT_EQ(r.code(), c.code) << c.mention;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(c.mention), std::string::npos) << r.status().message();
    }
  }
  EXPECT_TRUE(q().ListSchedules(queue)->empty());
  EXPECT_EQ(q().Stats(queue).code(), Code::kNotFound) << "a refused schedule makes no queue";
}

// Across a restart a schedule goes on with no run made twice and none missed. A manual clock moved
// past ten runs at once is moreover what a store sees after no server ran for that long: the runs
// already made into jobs are delivered, and the ones missed follow the misfire rule. (On a real
// clock the misfire rule is RedisStore.MissedRunsFollowTheMisfireRuleWhenAServerStartsAgain's.)
TEST_P(QueueConformance, ARestartMakesNoRunTwiceAndMissedRunsFollowTheMisfireRule) {
  const std::string queue = QueueName();
  if (!h_->exact_time()) {
    ASSERT_TRUE(q().PutSchedule(queue, Every("tick", 1'000)).ok());
    h_->Restart();
    std::map<std::string, int> seen;
    for (int i = 0; i < 400 && seen.size() < 3; ++i) {
      h_->Advance(100);
      for (const auto& d : MustReserve(q(), queue, 10)) {
        ++seen[d.key];
        ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
      }
    }
    ASSERT_GE(seen.size(), 3u);
    std::set<int64_t> runs;
    for (const auto& [key, n] : seen) {
      EXPECT_EQ(n, 1) << key;
      runs.insert(std::stoll(key.substr(key.rfind(':') + 1)));
    }
    for (auto it = std::next(runs.begin()); it != runs.end(); ++it) EXPECT_EQ(*it - *std::prev(it), 1'000);
    return;
  }
  for (auto [name, misfire] :
       {std::pair{"skip", Misfire::kSkip}, std::pair{"once", Misfire::kRunOnce}, std::pair{"all", Misfire::kRunAll}}) {
    ASSERT_TRUE(q().PutSchedule(queue, Every(name, 60'000, misfire)).ok());
  }
  h_->Restart();
  // The runs made into jobs ahead (the next one, and the one after when it is within the lead).
  auto scheduled = q().ListJobs(queue, ListRequest{JobState::kScheduled, 1000, {}});
  ASSERT_TRUE(scheduled.ok());
  const int ahead = static_cast<int>(scheduled->jobs.size()) / 3;
  ASSERT_GE(ahead, 1);
  h_->Advance(10 * 60'000 + 500);  // ten runs pass
  std::map<std::string, int> ready;
  auto count = [&] {
    ready.clear();
    auto page = q().ListJobs(queue, ListRequest{JobState::kReady, 1000, {}});
    if (!page.ok()) return false;
    for (const auto& j : page->jobs) ++ready[j.headers.at("delayq-schedule")];
    return ready["skip"] == ahead && ready["once"] == ahead + 1 && ready["all"] == 10;
  };
  EXPECT_TRUE(Eventually(count)) << "ready: skip " << ready["skip"] << ", once " << ready["once"] << ", all "
                                 << ready["all"] << " (" << ahead << " were jobs ahead of time)";
  // Each goes on from now: its next run is a job again.
  for (const char* name : {"skip", "once", "all"}) {
    auto s = q().GetSchedule(queue, name);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(Eventually([&] { return q().Get(queue, JobRef::ByKey(KeyOf(name, s->next_runs[0]))).ok(); })) << name;
  }
}

}  // namespace delayq::testing
