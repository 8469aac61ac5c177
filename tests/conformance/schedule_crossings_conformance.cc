// The conformance suite, where recurring schedules meet the rest, on every store: a queue's
// max_delay_ms (runs are made ahead only as far as the queue takes a delay; a queue that cannot
// hold a run made ahead takes no schedule; a config change that would refuse a schedule's runs is
// refused), dates at the int64 limits, and several clients changing one schedule at once (no run
// is left behind). Each crossing was a defect a hostile user found.
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

ScheduleSpec Every(std::string name, int64_t every_ms, Misfire misfire = Misfire::kRunOnce) {
  ScheduleSpec s;
  s.name = std::move(name);
  s.every_ms = every_ms;
  s.payload = R"({"tick":true})";
  s.misfire = misfire;
  return s;
}

std::string KeyOf(const std::string& name, int64_t at) { return "schedule:" + name + ":" + std::to_string(at); }

// The queue's jobs of one state, every page.
std::vector<delayq::Job> AllJobs(Queue& q, const std::string& queue, JobState state) {
  std::vector<delayq::Job> out;
  ListRequest r{state, 1000, {}};
  for (int page = 0; page < 100; ++page) {
    auto p = q.ListJobs(queue, r);
    if (!p.ok()) break;
    out.insert(out.end(), p->jobs.begin(), p->jobs.end());
    if (p->next_cursor.empty()) break;
    r.cursor = p->next_cursor;
  }
  return out;
}

}  // namespace

// Found: with max_delay_ms 10 s, every batch of coming runs (30 s ahead) was refused, so with
// misfire skip no run was ever delivered, and with run_once each came late as a missed run.
TEST_P(QueueConformance, AScheduleRunsOnTimeOnAQueueWithAShortMaxDelay) {
  const std::string queue = QueueName();
  QueueConfig c;
  c.max_delay_ms = 3'000;
  ASSERT_TRUE(q().SetConfig(queue, c).ok());
  auto put = q().PutSchedule(queue, Every("tick", 1'000, Misfire::kSkip));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  std::map<std::string, int64_t> runs;  // key -> due
  int early = 0;
  for (int step = 0; step < 400 && runs.size() < 4; ++step) {
    h_->Advance(h_->exact_time() ? 500 : 100);
    const int64_t now = h_->NowMs();
    // The runner's promise: the next run is a job already (its thread keeps it so; on a manual
    // clock it is given the moment it needs after each step, as real time would give it).
    bool next_made = false;
    for (int i = 0; i < 2000 && !next_made; ++i) {
      const auto scheduled = AllJobs(q(), queue, JobState::kScheduled);
      const int64_t seen = h_->NowMs();  // the runner made them at this moment or before
      for (const delayq::Job& j : scheduled) {
        EXPECT_LE(j.due_at_ms, seen + c.max_delay_ms) << "a run made further ahead than the queue takes a delay";
        next_made = next_made || j.due_at_ms > now;
      }
      if (!next_made) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the runner's thread
    }
    ASSERT_TRUE(next_made) << "no coming run is a job at " << now;
    for (const auto& d : MustReserve(q(), queue, 10)) {
      if (d.due_at_ms > h_->NowMs()) ++early;
      runs.emplace(d.key, d.due_at_ms);
      ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
    }
  }
  ASSERT_GE(runs.size(), 4u) << "the runs of a schedule on a queue with max_delay_ms 3 s are delivered";
  EXPECT_EQ(early, 0);
  std::set<int64_t> dues;
  for (const auto& [key, due] : runs) {
    EXPECT_EQ(key, KeyOf("tick", due));
    dues.insert(due);
  }
  // Consecutive seconds: none was skipped as "missed". On a real clock, a loaded machine may hold
  // the runner back past a run's moment, and misfire skip then rightly skips it: whole seconds.
  for (auto it = std::next(dues.begin()); it != dues.end(); ++it) {
    if (h_->exact_time()) {
      EXPECT_EQ(*it - *std::prev(it), 1'000);
    } else {
      EXPECT_EQ((*it - *std::prev(it)) % 1'000, 0) << *it - *std::prev(it);
    }
  }
}

TEST_P(QueueConformance, AScheduleIsRefusedWhereItsQueueCannotHoldItsRuns) {
  const std::string queue = QueueName();
  QueueConfig tiny;
  tiny.max_delay_ms = ScheduleLimits::kMinQueueMaxDelayMs - 1;
  ASSERT_TRUE(q().SetConfig(queue, tiny).ok());
  auto refused = q().PutSchedule(queue, Every("tick", 1'000));
  ASSERT_EQ(refused.code(), Code::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("max_delay_ms"), std::string::npos) << refused.status().message();
  EXPECT_EQ(q().GetSchedule(queue, "tick").code(), Code::kNotFound) << "a refused schedule is not stored";

  // With a schedule in place, a config that would refuse its runs is refused, and nothing changes.
  QueueConfig roomy;
  roomy.max_delay_ms = 60'000;
  ASSERT_TRUE(q().SetConfig(queue, roomy).ok());
  ScheduleSpec big = Every("tick", 3'600'000);
  big.payload = "\"" + std::string(4000, 'p') + "\"";
  ASSERT_TRUE(q().PutSchedule(queue, big).ok());
  QueueConfig lower = roomy;
  lower.max_delay_ms = 1'000;
  Status s = q().SetConfig(queue, lower);
  EXPECT_EQ(s.code(), Code::kConflict) << s.ToString();
  EXPECT_NE(s.message().find("tick"), std::string::npos) << "names the schedule: " << s.message();
  EXPECT_NE(s.message().find("max_delay_ms"), std::string::npos) << s.message();
  QueueConfig small = roomy;
  small.max_payload = 100;
  s = q().SetConfig(queue, small);
  EXPECT_EQ(s.code(), Code::kConflict) << s.ToString();
  EXPECT_NE(s.message().find("payload"), std::string::npos) << s.message();
  auto kept = q().GetConfig(queue);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->max_delay_ms, 60'000) << "a refused config changes nothing";
  EXPECT_EQ(kept->max_payload, roomy.max_payload);
  // A change its runs still fit is taken; once the schedule is gone, so is the lower one.
  QueueConfig more = roomy;
  more.max_attempts = 2;
  EXPECT_TRUE(q().SetConfig(queue, more).ok());
  ASSERT_TRUE(q().DeleteSchedule(queue, "tick").ok());
  EXPECT_TRUE(q().SetConfig(queue, lower).ok());
}

// Found: start_at INT64_MAX was taken, and its next runs overflowed into negative dates.
TEST_P(QueueConformance, AScheduleTakesDatesOnlyWithinTheDatesThereAre) {
  for (int64_t bad : {INT64_MAX, INT64_MIN, int64_t{-1}, Limits::kMaxDateMs + 1}) {
    const std::string queue = QueueName();
    ScheduleSpec start = Every("s", 1'000);
    start.start_at_ms = bad;
    auto a = q().PutSchedule(queue, start);
    EXPECT_EQ(a.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(a.status().message().find("start_at"), std::string::npos) << a.status().message();
    ScheduleSpec end = Every("s", 1'000);
    end.end_at_ms = bad;
    auto b = q().PutSchedule(queue, end);
    EXPECT_EQ(b.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(b.status().message().find("end_at"), std::string::npos) << b.status().message();
    EXPECT_EQ(q().Stats(queue).code(), Code::kNotFound) << "a refused schedule makes no queue";
  }
  // The ends of the range are dates: the runs fall on whole periods from start_at, none overflows.
  const std::string queue = QueueName();
  ScheduleSpec last = Every("last", 1'000);
  last.start_at_ms = Limits::kMaxDateMs - 2'999;
  auto put = q().PutSchedule(queue, last);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  ASSERT_FALSE(put->next_runs.empty());
  for (int64_t run : put->next_runs) {
    EXPECT_GE(run, *last.start_at_ms);
    EXPECT_EQ((run - *last.start_at_ms) % 1'000, 0);
  }
  ScheduleSpec first = Every("first", 1'000);
  first.start_at_ms = 0;
  first.end_at_ms = Limits::kMaxDateMs;
  put = q().PutSchedule(queue, first);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  ASSERT_FALSE(put->next_runs.empty());
  for (int64_t run : put->next_runs) EXPECT_EQ(run % 1'000, 0) << "whole seconds from start_at 0";
}

}  // namespace delayq::testing

namespace delayq::testing {
namespace {

// Four clients put, replace, pause, resume and delete one schedule at once, `ops` times each; then
// one last change with nothing competing. Runs a schedule still has afterwards are those its last
// state names; a deleted or paused schedule has none that are not yet due.
void Race(QueueHarness& h, const std::string& queue, bool end_with_delete) {
  constexpr int kThreads = 4, kOps = 40;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  const int64_t base = h.NowMs();
  // Each put a spec of its own: runs on a grid of their own, which no later put's runs share.
  auto spec = [&](int t, int i) {
    ScheduleSpec s = Every("race", 1'000 + 1'000 * (i % 2));
    s.start_at_ms = base + (t * 977 + i * 131) % 1'000;
    return s;
  };
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        Status s;
        switch ((t + i) % 5) {
          case 0:
          case 1: s = h.queue().PutSchedule(queue, spec(t, i)).status(); break;  // a put, or a replace
          case 2: s = h.queue().PauseSchedule(queue, "race", true).status(); break;
          case 3: s = h.queue().PauseSchedule(queue, "race", false).status(); break;
          default: s = h.queue().DeleteSchedule(queue, "race"); break;
        }
        // Losing a race is an answer (not found, or changed under it); nothing else is.
        if (!s.ok() && s.code() != Code::kNotFound && s.code() != Code::kUnavailable) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors, 0);
  auto last_put = h.queue().PutSchedule(queue, Every("race", 1'000));
  ASSERT_TRUE(last_put.ok()) << last_put.status().ToString();
  const int64_t before = h.NowMs();
  if (end_with_delete) {
    Status deleted = h.queue().DeleteSchedule(queue, "race");
    ASSERT_TRUE(deleted.ok()) << deleted.ToString();
  } else {
    auto paused = h.queue().PauseSchedule(queue, "race", true);
    ASSERT_TRUE(paused.ok()) << paused.status().ToString();
  }
  // The runner's thread may still be finishing a pass it began before the last change: it must
  // take back what it made, so the count is read once nothing more changes (a bounded wait: 10 s,
  // for a pass slowed by a sanitizer on a loaded machine; it ends as soon as none is left).
  std::vector<delayq::Job> left;
  for (int i = 0; i < 200; ++i) {
    left.clear();
    for (const delayq::Job& j : AllJobs(h.queue(), queue, JobState::kScheduled)) {
      if (j.due_at_ms > before + 1'000) left.push_back(j);
    }
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the runner's thread finishing its pass
  }
  std::string keys;
  for (size_t i = 0; i < left.size() && i < 10; ++i) keys += left[i].key + " ";
  EXPECT_TRUE(left.empty()) << left.size() << " runs left behind after the schedule was "
                            << (end_with_delete ? "deleted" : "paused") << ": " << keys;
}

}  // namespace

// Found: after 4 threads changed one schedule for 5 s, a delete left 31 coming runs as jobs, a
// pause 16: a pass that made runs and then lost the compare-and-set to the change never took them
// back.
TEST_P(QueueConformance, ConcurrentScheduleChangesLeaveNoRunBehindADelete) { Race(*h_, QueueName(), true); }

TEST_P(QueueConformance, ConcurrentScheduleChangesLeaveNoRunBehindAPause) { Race(*h_, QueueName(), false); }

}  // namespace delayq::testing

namespace delayq::testing {

// A schedule's runs carry its priority and group (issue 34), validated as a job's.
TEST_P(QueueConformance, AScheduleGivesItsRunsItsPriorityAndGroup) {
  const std::string queue = QueueName();
  ScheduleSpec spec = Every("tenant-report", 3'600'000);
  spec.priority = 7;
  spec.group = "tenant-7";
  auto put = q().PutSchedule(queue, spec);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->spec.priority, 7);
  EXPECT_EQ(put->spec.group, "tenant-7");
  auto got = q().GetSchedule(queue, "tenant-report");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->spec, put->spec);
  auto job = q().Get(queue, JobRef::ByKey(KeyOf("tenant-report", put->next_runs[0])));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->priority, 7);
  EXPECT_EQ(job->group, "tenant-7");
  // Replaced without them: the coming run is made again without them.
  ASSERT_TRUE(q().PutSchedule(queue, Every("tenant-report", 3'600'000)).ok());
  job = q().Get(queue, JobRef::ByKey(KeyOf("tenant-report", put->next_runs[0])));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->priority, 0);
  EXPECT_EQ(job->group, "");

  for (auto [priority, group] : {std::pair<int32_t, std::string>{10, ""}, {-1, ""}, {0, std::string(129, 'g')}}) {
    const std::string other = QueueName();
    ScheduleSpec bad = Every("bad", 60'000);
    bad.priority = priority;
    bad.group = group;
    auto refused = q().PutSchedule(other, bad);
    EXPECT_EQ(refused.code(), Code::kInvalidArgument) << priority << " " << group.size();
    EXPECT_NE(refused.status().message().find(group.empty() ? "priority" : "group"), std::string::npos)
        << refused.status().message();
    EXPECT_EQ(q().Stats(other).code(), Code::kNotFound);
  }
}

// A schedule's template takes a trace context as a job's headers do (docs/http-api.md, "Trace
// context"): each run carries it, and a malformed one is refused by name before the queue exists.
TEST_P(QueueConformance, AScheduleGivesItsRunsItsTraceContext) {
  const std::string queue = QueueName();
  const std::string parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  ScheduleSpec spec = Every("traced-report", 3'600'000);
  spec.headers["traceparent"] = parent;
  spec.headers["tracestate"] = "rojo=00f067aa0ba902b7";
  spec.headers["team"] = "billing";
  auto put = q().PutSchedule(queue, spec);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->spec.headers, spec.headers);
  auto job = q().Get(queue, JobRef::ByKey(KeyOf("traced-report", put->next_runs[0])));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(TraceParentOf(job->headers), parent);
  EXPECT_EQ(TraceStateOf(job->headers), "rojo=00f067aa0ba902b7");
  EXPECT_EQ(job->headers.at("team"), "billing");

  const std::vector<std::pair<Headers, std::string>> bad = {
      {{{"traceparent", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}}, "traceparent"},
      {{{"traceparent", std::string(20'000, '0')}}, "traceparent"},
      {{{"tracestate", "a=1"}}, "tracestate is given without a traceparent"},
  };
  for (const auto& [headers, said] : bad) {
    const std::string other = QueueName();
    ScheduleSpec broken = Every("broken", 60'000);
    broken.headers = headers;
    auto refused = q().PutSchedule(other, broken);
    EXPECT_EQ(refused.code(), Code::kInvalidArgument) << said;
    EXPECT_NE(refused.status().message().find(said), std::string::npos) << refused.status().ToString();
    EXPECT_LT(refused.status().message().size(), 500u) << "a huge value is not echoed whole";
    EXPECT_EQ(q().Stats(other).code(), Code::kNotFound) << said;
  }
}

}  // namespace delayq::testing
