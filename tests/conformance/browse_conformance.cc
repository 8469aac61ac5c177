// The conformance suite, browsing (Queue::ListJobs): jobs by state, a page at a time, on every
// store: order, cursors, errors, concurrent changes, and a restart between two pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

// Every page of `state` with pages of `limit`, following the cursors to the end (a guard stops
// a listing that would never end).
std::vector<::delayq::Job> ListAll(Queue& q, const std::string& queue, JobState state, int32_t limit,
                                   int* pages = nullptr) {
  std::vector<::delayq::Job> all;
  ListRequest request{state, limit, {}};
  for (int i = 0; i < 10'000; ++i) {
    auto page = q.ListJobs(queue, request);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) return all;
    EXPECT_LE(page->jobs.size(), static_cast<size_t>(limit));
    if (pages) ++*pages;
    for (auto& j : page->jobs) {
      EXPECT_EQ(j.state, state) << j.id;
      all.push_back(std::move(j));
    }
    if (page->next_cursor.empty()) return all;
    request.cursor = page->next_cursor;
  }
  ADD_FAILURE() << "the listing did not end";
  return all;
}

std::vector<std::string> Ids(const std::vector<::delayq::Job>& jobs) {
  std::vector<std::string> ids;
  for (const auto& j : jobs) ids.push_back(j.id);
  return ids;
}

// Asserts `jobs` holds each of `want` exactly once, in that order where the store orders.
void ExpectListed(const QueueHarness& h, const std::vector<::delayq::Job>& jobs, std::vector<std::string> want) {
  std::vector<std::string> got = Ids(jobs);
  if (!h.ordered()) {
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
  }
  EXPECT_EQ(got, want);
}

}  // namespace

TEST_P(QueueConformance, ListJobsPagesThroughEachStateInItsOrder) {
  const std::string queue = QueueName();
  const int64_t unit = h_->unit_ms();
  // Scheduled, enqueued latest-due first: the listing is by due time, not by creation. (Fixed
  // due times: on a real clock, delays would also count the time between the enqueues.)
  std::vector<std::string> scheduled(23);
  const int64_t base = h_->NowMs() + 100 * unit;
  for (int i = 22; i >= 0; --i) {
    EnqueueRequest r = Job("s" + std::to_string(i));
    r.when.deliver_at_ms = base + i * 7;
    scheduled[static_cast<size_t>(i)] = MustEnqueue(q(), queue, r).id;
  }
  // Ready: due now, in creation order.
  std::vector<std::string> ready;
  for (int i = 0; i < 12; ++i) ready.push_back(MustEnqueue(q(), queue, Job("r" + std::to_string(i))).id);
  StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 12; });

  int pages = 0;
  auto listed = ListAll(q(), queue, JobState::kScheduled, 5, &pages);
  ExpectListed(*h_, listed, scheduled);
  EXPECT_GE(pages, 5) << "23 jobs in pages of 5";
  for (size_t i = 0; i + 1 < listed.size() && h_->ordered(); ++i)
    EXPECT_LE(listed[i].due_at_ms, listed[i + 1].due_at_ms);
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed[0].payload.substr(0, 1), "s") << "listed jobs carry their payload";
  ExpectListed(*h_, ListAll(q(), queue, JobState::kReady, 5), ready);

  // Reserve 4: they move from ready to reserved, with their lease deadline.
  auto got = MustReserve(q(), queue, 4);
  ASSERT_EQ(got.size(), 4u);
  std::vector<std::string> reserved;
  for (const auto& d : got) reserved.push_back(d.id);
  auto leased = ListAll(q(), queue, JobState::kReserved, 3);
  ExpectListed(*h_, leased, reserved);
  for (const auto& j : leased) EXPECT_GT(j.lease_deadline_ms, 0) << j.id;
  auto still_ready = ListAll(q(), queue, JobState::kReady, 100);
  EXPECT_EQ(still_ready.size(), 8u);
  for (const auto& j : still_ready) EXPECT_EQ(std::count(reserved.begin(), reserved.end(), j.id), 0) << j.id;

  // Dead, in the order they died.
  std::vector<std::string> dead;
  for (int i = 3; i >= 0; --i) {
    auto n = q().Nack(queue, {got[static_cast<size_t>(i)].receipt, std::nullopt, "poison", true});
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    dead.push_back(got[static_cast<size_t>(i)].id);
    h_->Advance(1);
  }
  auto died = ListAll(q(), queue, JobState::kDead, 2);
  if (h_->exact_time()) {
    ExpectListed(*h_, died, dead);
  } else {  // deaths in one millisecond are listed by id
    std::vector<std::string> got_ids = Ids(died), want = dead;
    std::sort(got_ids.begin(), got_ids.end());
    std::sort(want.begin(), want.end());
    EXPECT_EQ(got_ids, want);
  }
  for (size_t i = 0; i + 1 < died.size(); ++i) EXPECT_LE(died[i].dead_at_ms, died[i + 1].dead_at_ms);
  EXPECT_TRUE(ListAll(q(), queue, JobState::kReserved, 10).empty());
  // The dead list's first page is the listing's.
  auto first = q().ListDead(queue, 2);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(died.size(), 4u);
  EXPECT_EQ(Ids(*first), (std::vector<std::string>{died[0].id, died[1].id}));
}

TEST_P(QueueConformance, ListJobsRefusesBadLimitsAndCursorsAndCreatesNoQueue) {
  const std::string queue = QueueName();
  EXPECT_EQ(q().ListJobs(queue, {JobState::kScheduled, 10, {}}).code(), Code::kNotFound);
  EXPECT_EQ(q().Stats(queue).code(), Code::kNotFound) << "a listing created the queue";
  for (int i = 0; i < 3; ++i) MustEnqueue(q(), queue, Job("x", 100 * h_->unit_ms() + i));
  for (int32_t limit : {0, -1, Limits::kMaxListPage + 1}) {
    auto r = q().ListJobs(queue, {JobState::kScheduled, limit, {}});
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << limit;
    EXPECT_NE(r.status().message().find("limit"), std::string::npos) << r.status().ToString();
  }
  auto page = q().ListJobs(queue, {JobState::kScheduled, 1, {}});
  ASSERT_TRUE(page.ok());
  ASSERT_FALSE(page->next_cursor.empty());
  // The cursor of one state is refused by another, naming both.
  auto other = q().ListJobs(queue, {JobState::kDead, 1, page->next_cursor});
  EXPECT_EQ(other.code(), Code::kInvalidArgument);
  EXPECT_NE(other.status().message().find("scheduled"), std::string::npos) << other.status().ToString();
  const std::string hostile[] = {"x",
                                 "scheduled",
                                 "scheduled.",
                                 "scheduled.1.",
                                 "scheduled.-5.01ARZ3NDEKTSV4RRFFQ69G5FAV",
                                 "scheduled.99999999999999999999999.01ARZ3NDEKTSV4RRFFQ69G5FAV",
                                 "scheduled.1.not a ulid",
                                 "scheduled.1.ILLEGALULIDILLEGALULIDILLEG",
                                 "scheduled.1.01ARZ3NDEKTSV4RRFFQ69G5FAV\n",
                                 std::string("scheduled.1.01ARZ3NDEK\0TSV4RRFFQ69G5FAV", 38),
                                 "nosuchstate.1.01ARZ3NDEKTSV4RRFFQ69G5FAV",
                                 std::string(5000, 'a'),
                                 "ready.1.2_99999",
                                 "scheduled.1." + std::string(41, '0')};
  for (const auto& cursor : hostile) {
    JobState state = cursor.starts_with("ready") ? JobState::kReady : JobState::kScheduled;
    auto r = q().ListJobs(queue, {state, 10, cursor});
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << cursor << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("cursor"), std::string::npos) << r.status().ToString();
    EXPECT_LT(r.status().message().size(), 400u) << "the error echoes at most a bounded part of the cursor";
  }
  EXPECT_EQ(MustStats(q(), queue).scheduled, 3) << "nothing changed";
}

// While other clients enqueue, cancel, reserve and ack in the same queue, and others send bad
// cursors, a listing of jobs that stay scheduled throughout lists each of them exactly once.
TEST_P(QueueConformance, AListingUnderConcurrentChangesListsEveryStableJobOnce) {
  const std::string queue = QueueName();
  const int64_t far = 1000 * h_->unit_ms();
  std::set<std::string> stable;
  for (int i = 0; i < 150; ++i) stable.insert(MustEnqueue(q(), queue, Job("stable", far + i * 3)).id);
  std::atomic<bool> stop{false};
  std::atomic<int> churned{0}, refused{0};
  std::thread churn([&] {
    for (int i = 0; !stop; ++i) {
      // Jobs that come and go among the stable ones, and ready ones reserved and acked.
      auto e = q().Enqueue(queue, Job("churn", far + (i % 150) * 3 + 1));
      if (e.ok()) {
        EXPECT_TRUE(q().Cancel(queue, JobRef::ById(e->id)).ok());
      }
      auto r = q().Enqueue(queue, Job("now"));
      if (!r.ok()) {
        ADD_FAILURE() << r.status().ToString();
        churned = 1 << 20;  // lets the listing start: the test has failed
        return;
      }
      ReserveRequest rr;
      rr.max = 5;
      auto got = q().Reserve(queue, rr);
      if (got.ok()) {
        for (const auto& d : *got) EXPECT_TRUE(q().Ack(queue, d.receipt).ok());
      }
      ++churned;
    }
  });
  std::thread hostile([&] {
    for (int i = 0; !stop; ++i) {
      auto r = q().ListJobs(queue, {JobState::kScheduled, 3, "scheduled.1." + std::to_string(i)});
      EXPECT_EQ(r.code(), Code::kInvalidArgument);
      ++refused;
    }
  });
  // The listing starts once both are under way (and they go on until it ends).
  while (churned < 5 || refused < 5) std::this_thread::yield();
  std::vector<::delayq::Job> listed;
  for (int round = 0; round < 3; ++round) {
    listed = ListAll(q(), queue, JobState::kScheduled, 7);
    std::map<std::string, int> seen;
    for (const auto& j : listed) ++seen[j.id];
    for (const auto& id : stable) EXPECT_EQ(seen[id], 1) << "stable job " << id << " in round " << round;
    for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << "listed twice: " << id;
  }
  stop = true;
  churn.join();
  hostile.join();
}

// A listing of a few jobs among very many of another state still ends with each of them: pages
// that read a store's scan budget without a match come back short (even empty) with a cursor.
TEST_P(QueueConformance, AListingOfAFewAmongManyOfAnotherStateFindsEachOfThem) {
  const std::string queue = QueueName();
  constexpr int kMany = 5'500;  // past each store's budget for one page (5 000 entries read)
  std::vector<EnqueueRequest> batch(1000, Job("many"));
  for (int i = 0; i < kMany / 1000; ++i) ASSERT_TRUE(q().EnqueueBatch(queue, batch).ok());
  ASSERT_TRUE(q().EnqueueBatch(queue, std::vector<EnqueueRequest>(kMany % 1000, Job("many"))).ok());
  const EnqueueResult later = MustEnqueue(q(), queue, Job("later", 100 * h_->unit_ms()));
  StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == kMany; });
  // One scheduled job behind thousands of ready ones (in the embedded store's due index).
  auto scheduled = ListAll(q(), queue, JobState::kScheduled, 10);
  ASSERT_EQ(scheduled.size(), 1u);
  EXPECT_EQ(scheduled[0].id, later.id);
  // Reserve all but one: one ready job behind thousands of reserved ones (in Redis' stream).
  int reserved = 0;
  while (reserved < kMany - 1) {
    reserved += static_cast<int>(MustReserve(q(), queue, std::min(1000, kMany - 1 - reserved), 600'000).size());
  }
  auto ready = ListAll(q(), queue, JobState::kReady, 10);
  EXPECT_EQ(ready.size(), 1u);
  int pages = 0;
  EXPECT_EQ(ListAll(q(), queue, JobState::kReserved, 1000, &pages).size(), static_cast<size_t>(kMany - 1));
  EXPECT_GE(pages, (kMany - 1) / 1000);
}

// A cursor is a position in the store, so it holds across a restart of the store (or server).
TEST_P(QueueConformance, ACursorStillWorksAfterARestart) {
  const std::string queue = QueueName();
  std::vector<std::string> want;
  for (int i = 0; i < 9; ++i) want.push_back(MustEnqueue(q(), queue, Job("p", 100 * h_->unit_ms() + i)).id);
  auto first = q().ListJobs(queue, {JobState::kScheduled, 4, {}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->jobs.size(), 4u);
  h_->Restart();
  std::vector<::delayq::Job> all = first->jobs;
  ListRequest next{JobState::kScheduled, 4, first->next_cursor};
  while (!next.cursor.empty()) {
    auto page = q().ListJobs(queue, next);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    all.insert(all.end(), page->jobs.begin(), page->jobs.end());
    next.cursor = page->next_cursor;
  }
  ExpectListed(*h_, all, want);
}

}  // namespace delayq::testing

namespace delayq::testing {
namespace {

std::vector<std::string> SortedIds(const std::vector<::delayq::Job>& jobs) {
  std::vector<std::string> ids = Ids(jobs);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

// Jobs with a priority or a group are listed in every state like any other (on Redis they wait in
// lanes, not the stream, and a listing showed none of them: issue 34), page by page with
// cursors that hold across a restart.
TEST_P(QueueConformance, AListingShowsJobsOfEveryGroupAndPriorityInEveryState) {
  const std::string queue = QueueName();
  std::vector<std::string> ready, scheduled;
  std::string both;  // a job with a priority and a group
  for (int i = 0; i < 32; ++i) {
    EnqueueRequest j = Job("j" + std::to_string(i), i < 24 ? 0 : 100 * h_->unit_ms() + i);
    if (i % 4 == 1) j.priority = 1 + i % 9;
    if (i % 4 == 2) j.group = "tenant-" + std::to_string(i % 3);
    if (i % 4 == 3) {
      j.priority = 9;
      j.group = "tenant-x";
    }
    (i < 24 ? ready : scheduled).push_back(MustEnqueue(q(), queue, j).id);
    if (i == 3) both = ready.back();
  }
  std::sort(ready.begin(), ready.end());
  std::sort(scheduled.begin(), scheduled.end());
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 24; });
  EXPECT_EQ(SortedIds(ListAll(q(), queue, JobState::kReady, 5)), ready);
  EXPECT_EQ(SortedIds(ListAll(q(), queue, JobState::kScheduled, 3)), scheduled);
  for (const auto& j : ListAll(q(), queue, JobState::kReady, 100)) {
    if (j.id == both) {
      EXPECT_EQ(j.priority, 9);
      EXPECT_EQ(j.group, "tenant-x");
    }
  }

  // A page ends inside the jobs with a priority or a group; its cursor holds across a restart.
  auto first = q().ListJobs(queue, {JobState::kReady, 20, {}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<::delayq::Job> across = first->jobs;
  h_->Restart();
  ListRequest next{JobState::kReady, 3, first->next_cursor};
  for (int i = 0; i < 100 && !next.cursor.empty(); ++i) {
    auto page = q().ListJobs(queue, next);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    across.insert(across.end(), page->jobs.begin(), page->jobs.end());
    next.cursor = page->next_cursor;
  }
  EXPECT_EQ(SortedIds(across), ready);

  // Reserved ones (a reserve takes them by group and priority), the rest still ready.
  auto taken = MustReserve(q(), queue, 10, 3'600'000);
  ASSERT_EQ(taken.size(), 10u);
  std::vector<std::string> reserved;
  for (const auto& d : taken) reserved.push_back(d.id);
  std::sort(reserved.begin(), reserved.end());
  std::vector<std::string> rest;
  std::set_difference(ready.begin(), ready.end(), reserved.begin(), reserved.end(), std::back_inserter(rest));
  EXPECT_EQ(SortedIds(ListAll(q(), queue, JobState::kReserved, 4)), reserved);
  EXPECT_EQ(SortedIds(ListAll(q(), queue, JobState::kReady, 4)), rest);

  // Dead ones, and acked ones gone from every listing.
  std::vector<std::string> dead;
  for (size_t i = 0; i < 3; ++i) {
    NackRequest n;
    n.receipt = taken[i].receipt;
    n.dead = true;
    ASSERT_TRUE(q().Nack(queue, n).ok());
    dead.push_back(taken[i].id);
  }
  for (size_t i = 3; i < taken.size(); ++i) ASSERT_TRUE(q().Ack(queue, taken[i].receipt).ok());
  std::sort(dead.begin(), dead.end());
  EXPECT_EQ(SortedIds(ListAll(q(), queue, JobState::kDead, 2)), dead);
  EXPECT_TRUE(ListAll(q(), queue, JobState::kReserved, 10).empty());
  EXPECT_EQ(SortedIds(ListAll(q(), queue, JobState::kReady, 7)), rest);
}

}  // namespace delayq::testing
