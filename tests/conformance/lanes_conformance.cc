// The conformance suite, priorities and fair groups (EnqueueRequest::priority and group,
// QueueConfig::group_max_reserved and priority_aging_ms; docs/http-api.md, Priorities and fair groups; the rule is
// core/ready_order.h) on every store: higher priority first, aged so a low one is not starved;
// groups take turns, so a tenant with few ready jobs is served between the jobs of one with many;
// a group at its cap waits for one of its leases to end; the fields survive nacks, expired leases,
// replaces and restarts; bad values are refused; threads at once never pass a group's cap.
//
// On a queue split into shards (ordered() false) the order holds within a shard only: there the
// suite checks what still holds (every job once, the fields, the caps' bounds).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

EnqueueRequest Laned(std::string payload, int32_t priority, std::string group = {}) {
  EnqueueRequest r = Job(std::move(payload));
  r.priority = priority;
  r.group = std::move(group);
  return r;
}

void SetLanes(Queue& q, const std::string& queue, int64_t aging_ms, int64_t group_cap) {
  QueueConfig c;
  c.priority_aging_ms = aging_ms;
  c.group_max_reserved = group_cap;
  auto s = q.SetConfig(queue, c);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// Takes `n` jobs one reserve at a time (acking each), and returns their payloads in order.
std::vector<std::string> TakeOneByOne(QueueHarness& h, const std::string& queue, size_t n) {
  std::vector<std::string> out;
  for (int tries = 0; out.size() < n && tries < 2000; ++tries) {
    auto got = MustReserve(h.queue(), queue, 1);
    if (got.empty()) {
      h.Advance(10);  // the real clock's scheduler has not made them ready yet
      continue;
    }
    out.push_back(got[0].payload);
    EXPECT_TRUE(h.queue().Ack(queue, got[0].receipt).ok());
  }
  return out;
}

}  // namespace

TEST_P(QueueConformance, HigherPriorityGoesFirstThenEarlierDue) {
  const std::string queue = QueueName();
  SetLanes(q(), queue, 0, 0);  // strict priorities
  const int64_t u = h_->unit_ms();
  // Due in this order: a (priority 0), b (5), c (5), d (9), e (0).
  std::vector<EnqueueRequest> jobs = {Laned("\"a\"", 0), Laned("\"b\"", 5), Laned("\"c\"", 5), Laned("\"d\"", 9),
                                      Laned("\"e\"", 0)};
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].when.delay_ms = static_cast<int64_t>(i + 1) * 10;
  ASSERT_TRUE(q().EnqueueBatch(queue, jobs).ok());
  h_->Advance(u);
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 5; });
  auto order = TakeOneByOne(*h_, queue, 5);
  ASSERT_EQ(order.size(), 5u);
  if (h_->ordered()) {
    EXPECT_EQ(order, (std::vector<std::string>{"\"d\"", "\"b\"", "\"c\"", "\"a\"", "\"e\""}));
  } else {
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, (std::vector<std::string>{"\"a\"", "\"b\"", "\"c\"", "\"d\"", "\"e\""}));
  }
}

TEST_P(QueueConformance, ALowPriorityAgesPastAHighOneThatCameLater) {
  for (int64_t aging : {int64_t{0}, int64_t{1}}) {
    const std::string queue = QueueName();
    SetLanes(q(), queue, aging, 0);
    MustEnqueue(q(), queue, Laned("\"old\"", 0));
    h_->Advance(50);  // "old" has been due 50 ms: 50 levels of aging at 1 ms each (9 at most)
    MustEnqueue(q(), queue, Laned("\"new\"", 5));
    (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 2; });
    auto order = TakeOneByOne(*h_, queue, 2);
    ASSERT_EQ(order.size(), 2u);
    if (!h_->ordered()) continue;
    EXPECT_EQ(order[0], aging == 0 ? "\"new\"" : "\"old\"") << "priority_aging_ms " << aging;
  }
}

TEST_P(QueueConformance, ATenantWithFewJobsIsServedBetweenTheJobsOfOneWithMany) {
  const std::string queue = QueueName();
  std::vector<EnqueueRequest> big;
  for (int i = 0; i < 300; ++i) big.push_back(Laned("\"big\"", 0, "big"));
  ASSERT_TRUE(q().EnqueueBatch(queue, big).ok());
  std::vector<EnqueueRequest> small;
  for (int i = 0; i < 10; ++i) small.push_back(Laned("\"small\"", 0, "small"));
  ASSERT_TRUE(q().EnqueueBatch(queue, small).ok());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 310; });
  auto got = MustReserve(q(), queue, 20);
  ASSERT_EQ(got.size(), 20u);
  int from_small = 0;
  for (const auto& d : got) {
    from_small += d.group == "small";
    EXPECT_EQ(d.group, d.payload == "\"small\"" ? "small" : "big");
  }
  // One reserve of 20 takes the groups in turn: all 10 of "small". (A sharded queue takes turns
  // within each shard, and a reserve may be served by one shard.)
  if (h_->ordered()) {
    EXPECT_EQ(from_small, 10);
  }
  // The stats name the groups, the biggest first.
  auto s = MustStats(q(), queue);
  ASSERT_GE(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].group, "big");
  EXPECT_EQ(s.groups[0].ready + (s.groups.size() > 1 ? s.groups[1].ready : 0), 290);
  int64_t reserved = 0;
  for (const auto& g : s.groups) reserved += g.reserved;
  EXPECT_EQ(reserved, 20);
}

TEST_P(QueueConformance, AGroupAtItsCapWaitsForOneOfItsLeasesToEnd) {
  const std::string queue = QueueName();
  SetLanes(q(), queue, 60'000, 2);
  std::vector<EnqueueRequest> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(Laned("\"a\"", 0, "a"));
  for (int i = 0; i < 5; ++i) jobs.push_back(Laned("\"b\"", 3, "b"));
  ASSERT_TRUE(q().EnqueueBatch(queue, jobs).ok());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 10; });
  auto got = MustReserve(q(), queue, 10);
  std::map<std::string, int> per;
  for (const auto& d : got) ++per[d.group];
  if (h_->ordered()) {
    EXPECT_EQ(per["a"], 2);
    EXPECT_EQ(per["b"], 2);
    EXPECT_TRUE(MustReserve(q(), queue, 10).empty()) << "both groups are at their cap";
  } else {
    EXPECT_LE(per["a"], 2 * 4);  // each shard's share, rounded up, at most 4 shards
    EXPECT_GE(per["a"], 1);
  }
  // A waiting reserve is answered when a lease of a capped group ends. (On a sharded queue each
  // shard has its own share of the cap, and the shard of the lease that ends may have no job of
  // that group left: there every lease ends.)
  auto waiting = ReserveWaiting(q(), queue, 10'000, 5);
  for (const auto& d : got) {
    if (d.group == "a" || !h_->ordered()) {
      ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
      if (h_->ordered()) break;
    }
  }
  auto more = Await(waiting);
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  ASSERT_GE(more->size(), 1u);
  if (h_->ordered()) {
    ASSERT_EQ(more->size(), 1u);
    EXPECT_EQ((*more)[0].group, "a");
  }
}

// The default group's cap holds through a reserve that takes the last job with a group: the rest
// of that reserve comes in due order, from the default group alone, under its cap. (The Redis
// script once filled the rest from the stream with no cap: four jobs of a group capped at one.)
TEST_P(QueueConformance, TheDefaultGroupsCapHoldsWhenAReserveTakesTheLastGroupedJob) {
  const std::string queue = QueueName();
  SetLanes(q(), queue, 60'000, 1);
  std::vector<EnqueueRequest> jobs = {Job("\"p1\""), Job("\"p2\""), Job("\"p3\"")};
  ASSERT_TRUE(q().EnqueueBatch(queue, jobs).ok());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 3; });
  ASSERT_TRUE(q().Enqueue(queue, Laned("\"a1\"", 0, "a")).ok());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 4; });
  auto got = MustReserve(q(), queue, 4);
  std::map<std::string, int> per;
  for (const auto& d : got) ++per[d.group];
  if (h_->ordered()) {
    EXPECT_EQ(per[""], 1) << "the default group is capped at 1";
    EXPECT_EQ(per["a"], 1);
    EXPECT_TRUE(MustReserve(q(), queue, 4).empty()) << "both groups are at their cap";
  } else {
    EXPECT_LE(per[""], 4);  // each shard's share, rounded up, at most 4 shards
  }
  for (const auto& d : got) EXPECT_TRUE(q().Ack(queue, d.receipt).ok());
}

TEST_P(QueueConformance, PriorityAndGroupSurviveNackReplaceAndRestart) {
  const std::string queue = QueueName();
  EnqueueRequest r = Laned("\"x\"", 7, "tenant-7");
  r.key = "x";
  r.when.delay_ms = 10 * h_->unit_ms();
  auto id = MustEnqueue(q(), queue, r).id;
  MustEnqueue(q(), queue, Laned("\"p\"", 0, "tenant-7"));  // the same group: priority decides
  auto job = q().Get(queue, JobRef::ById(id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->priority, 7);
  EXPECT_EQ(job->group, "tenant-7");
  h_->Restart();  // scheduled: the fields come back from the store
  job = q().Get(queue, JobRef::ById(id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->priority, 7);
  EXPECT_EQ(job->group, "tenant-7");
  // Due now, and ahead of the priority-0 job of its group that was due first.
  ASSERT_TRUE(q().Reschedule(queue, JobRef::ById(id), When{0, std::nullopt}).ok());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 2; });
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  if (h_->ordered()) {
    EXPECT_EQ(got[0].id, id);
  }
  auto mine = got[0].id == id ? got : std::vector<Delivery>{};
  if (mine.empty()) {
    ASSERT_TRUE(q().Ack(queue, got[0].receipt).ok());
    mine = MustReserve(q(), queue, 1);
    ASSERT_EQ(mine.size(), 1u);
  }
  EXPECT_EQ(mine[0].priority, 7);
  EXPECT_EQ(mine[0].group, "tenant-7");
  // Nacked back to ready: still in its group, with its priority.
  NackRequest nack;
  nack.receipt = mine[0].receipt;
  nack.retry_in_ms = 0;
  ASSERT_TRUE(q().Nack(queue, nack).ok());
  h_->Restart();  // ready: the fields come back from the store
  (void)StatsWhen(*h_, queue, [&](const QueueStats& s) { return s.ready >= 1 && s.reserved == 0; });
  auto again = MustReserve(q(), queue, 10);
  bool seen = false;
  for (const auto& d : again) {
    if (d.id != id) continue;
    seen = true;
    EXPECT_EQ(d.attempt, 2);
    EXPECT_EQ(d.priority, 7);
    EXPECT_EQ(d.group, "tenant-7");
    ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
  }
  EXPECT_TRUE(seen);
  // A replace takes the new request's priority and group.
  EnqueueRequest second = Laned("\"y\"", 2, "g2");
  second.key = "y";
  second.when.delay_ms = 10 * h_->unit_ms();
  MustEnqueue(q(), queue, second);
  second.replace = true;
  second.priority = 0;
  second.group = "";
  MustEnqueue(q(), queue, second);
  auto replaced = q().Get(queue, JobRef::ByKey("y"));
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->priority, 0);
  EXPECT_EQ(replaced->group, "");
}

TEST_P(QueueConformance, BadPrioritiesAndGroupsAreRefusedAndChangeNothing) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("1"));
  for (int32_t p : {-1, 10, 1000}) {
    auto r = q().Enqueue(queue, Laned("1", p));
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << p;
    EXPECT_NE(r.status().message().find("priority"), std::string::npos) << r.status().message();
  }
  auto long_group = q().Enqueue(queue, Laned("1", 0, std::string(Limits::kMaxGroup + 1, 'g')));
  EXPECT_EQ(long_group.status().code(), Code::kInvalidArgument);
  EXPECT_NE(long_group.status().message().find("group has 129 bytes"), std::string::npos);
  auto nul = q().Enqueue(queue, Laned("1", 0, std::string("a\0b", 3)));
  EXPECT_EQ(nul.status().code(), Code::kInvalidArgument);
  // One bad job refuses its whole batch.
  std::vector<EnqueueRequest> batch = {Laned("1", 3, "ok"), Laned("1", 11)};
  EXPECT_FALSE(q().EnqueueBatch(queue, batch).ok());
  QueueConfig c;
  c.group_max_reserved = -1;
  EXPECT_EQ(q().SetConfig(queue, c).code(), Code::kInvalidArgument);
  c.group_max_reserved = 0;
  c.priority_aging_ms = -5;
  EXPECT_EQ(q().SetConfig(queue, c).code(), Code::kInvalidArgument);
  auto s = MustStats(q(), queue);
  EXPECT_EQ(s.ready + s.scheduled, 1);
  EXPECT_TRUE(s.groups.empty()) << "no job has a group";
}

// Threads reserving and acking at once, with jobs of several groups and priorities: a group's
// leases never pass its cap, and every job is delivered.
TEST_P(QueueConformance, ThreadsAtOnceNeverPassAGroupsCap) {
  const std::string queue = QueueName();
  const int64_t cap = 3;
  SetLanes(q(), queue, 60'000, cap);
  std::vector<EnqueueRequest> jobs;
  const std::vector<std::string> groups = {"", "a", "b", "c"};
  for (int i = 0; i < 200; ++i) {
    jobs.push_back(Laned("\"" + std::to_string(i) + "\"", i % 10, groups[static_cast<size_t>(i) % groups.size()]));
  }
  ASSERT_TRUE(q().EnqueueBatch(queue, jobs).ok());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 200; });
  std::mutex mu;
  std::map<std::string, int64_t> held;  // per group: reserved by a thread and not yet acked
  std::map<std::string, int64_t> most;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  const int64_t bound = h_->ordered() ? cap : cap * 4;  // a shard's share, rounded up, 4 shards at most
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      // A manual clock never ends a waiting reserve: there the threads ask without waiting.
      const int64_t wait_ms = h_->exact_time() ? 0 : 50;
      for (int idle = 0; done.load() < 200 && idle < 100'000;) {
        auto got = h_->queue().Reserve(queue, {.max = 2, .wait_ms = wait_ms});
        if (!got.ok() || got->empty()) {
          ++idle;
          continue;
        }
        {
          std::lock_guard lock(mu);
          for (const auto& d : *got) most[d.group] = std::max(most[d.group], ++held[d.group]);
        }
        for (const auto& d : *got) {
          {
            std::lock_guard lock(mu);
            --held[d.group];  // before the ack: this count never runs ahead of the store's
          }
          if (h_->queue().Ack(queue, d.receipt).ok()) ++done;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 200);
  for (const auto& [g, n] : most) EXPECT_LE(n, bound) << "group \"" << g << "\"";
}

}  // namespace delayq::testing

namespace delayq::testing {

// The documented exception (docs/http-api.md, issue 34): ready jobs of the default group at
// priority 0 go by due time on the embedded store, and in the order they became ready on Redis
// (its stream), so a replayed dead job goes after one that became ready before it, though due
// earlier. Each store is held to its own rule.
TEST_P(QueueConformance, AReplayedJobOfTheDefaultGroupGoesByEachStoresReadyOrder) {
  const std::string queue = QueueName();
  const std::string x = MustEnqueue(q(), queue, Job("x")).id;
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  NackRequest dead;
  dead.receipt = got[0].receipt;
  dead.dead = true;
  ASSERT_TRUE(q().Nack(queue, dead).ok());
  h_->Advance(h_->unit_ms());
  const std::string y = MustEnqueue(q(), queue, Job("y")).id;  // due after x
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 1; });
  auto replayed = q().ReplayDead(queue, std::vector<std::string>{x});
  ASSERT_TRUE(replayed.ok());
  ASSERT_EQ(*replayed, 1);
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 2; });
  // A replay makes the job due at its moment: on a manual clock the same millisecond as y (the
  // id, older, then goes first), on a real one that or a later one (a loaded machine).
  auto x_job = q().Get(queue, JobRef::ById(x));
  auto y_job = q().Get(queue, JobRef::ById(y));
  ASSERT_TRUE(x_job.ok() && y_job.ok());
  ASSERT_GE(x_job->due_at_ms, y_job->due_at_ms) << "a replayed job is due when it is replayed";
  const bool x_due_first = x_job->due_at_ms == y_job->due_at_ms;  // then by id: x is older
  auto both = MustReserve(q(), queue, 2);
  ASSERT_EQ(both.size(), 2u);
  if (!h_->ordered()) return;  // shards: order holds within one only
  if (h_->ready_in_arrival_order()) {
    EXPECT_EQ(both[0].id, y) << "the stream: the replayed job became ready last";
    EXPECT_EQ(both[1].id, x);
  } else {
    EXPECT_EQ(both[0].id, x_due_first ? x : y) << "due order, then id";
    EXPECT_EQ(both[1].id, x_due_first ? y : x);
  }
}

}  // namespace delayq::testing

namespace delayq::testing {

// Once every job with a group is done, whichever way its jobs left (reserved and acked,
// cancelled), the queue has no group left.
TEST_P(QueueConformance, AQueueWhoseGroupedJobsAreDoneHasNoGroupLeft) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Laned("g0", 0, "tenant"));
  MustEnqueue(q(), queue, Laned("g1", 0, "tenant"));
  auto cancelled = MustEnqueue(q(), queue, Laned("g2", 0, "other"));
  ASSERT_TRUE(q().Cancel(queue, JobRef{cancelled.id, ""}).ok());
  for (const std::string& p : TakeOneByOne(*h_, queue, 2)) EXPECT_EQ(p.substr(0, 1), "g");
  MustEnqueue(q(), queue, Job("plain-1"));
  MustEnqueue(q(), queue, Job("plain-2"));
  auto s = MustStats(q(), queue);
  EXPECT_TRUE(s.groups.empty()) << "a group is left: " << (s.groups.empty() ? "" : s.groups[0].group);
  // Both come (a sharded queue orders jobs due in one millisecond by shard, not by enqueue).
  auto plain = TakeOneByOne(*h_, queue, 2);
  std::sort(plain.begin(), plain.end());
  EXPECT_EQ(plain, (std::vector<std::string>{"plain-1", "plain-2"}));
}

}  // namespace delayq::testing
