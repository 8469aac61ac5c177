// The conformance suite, completed jobs kept with their results (SPEC §11.3) on every store: with a
// queue's keep_completed_ms above 0 an ack keeps its job as completed, with the ack's result, read
// by id (and by key while key_ttl_ms keeps the key), listed with cursors, counted, deleted by
// cancel and by the sweep once its time is up; never live (its receipt acts on nothing, its key is
// free, a queue holding only completed jobs is deleted without force). With 0 an ack deletes the
// job, as before, result or not. A result that is not JSON, or too large, is refused before the ack
// changes anything.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

Status AckWith(Queue& q, const std::string& queue, const std::string& receipt, std::optional<std::string> result) {
  return q.Ack(queue, AckRequest{receipt, std::move(result)});
}

void KeepCompleted(Queue& q, const std::string& queue, int64_t keep_ms) {
  QueueConfig config;
  config.keep_completed_ms = keep_ms;
  ASSERT_TRUE(q.SetConfig(queue, config).ok());
}

}  // namespace

TEST_P(QueueConformance, AnAckedJobIsKeptCompletedWithItsResult) {
  const std::string queue = QueueName();
  KeepCompleted(q(), queue, 3'600'000);
  EnqueueRequest r = Job("order-17");
  r.key = "order-17";
  r.key_ttl_ms = 600'000;
  r.headers = {{"a", "b"}};
  const EnqueueResult made = MustEnqueue(q(), queue, r);
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(AckWith(q(), queue, got[0].receipt, R"({"charged": 1999, "ok": true})").ok());

  auto job = q().Get(queue, JobRef::ById(made.id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kCompleted);
  EXPECT_EQ(job->result, R"({"charged": 1999, "ok": true})") << "kept as written";
  EXPECT_EQ(job->payload, "order-17");
  EXPECT_EQ(job->headers, (Headers{{"a", "b"}}));
  EXPECT_EQ(job->key, "order-17");
  EXPECT_EQ(job->attempt, 1);
  EXPECT_GE(job->completed_at_ms, job->created_at_ms);
  EXPECT_LE(job->completed_at_ms, h_->NowMs());
  EXPECT_EQ(job->progress, "");
  auto by_key = q().Get(queue, JobRef::ByKey("order-17"));
  ASSERT_TRUE(by_key.ok()) << "found by its key while key_ttl_ms keeps it: " << by_key.status().ToString();
  EXPECT_EQ(by_key->id, made.id);
  EXPECT_EQ(by_key->state, JobState::kCompleted);

  // Never live: its receipt acts on nothing, and it is no duplicate of a new job... except while
  // its key is kept, as an acked job's.
  EXPECT_EQ(q().Ack(queue, got[0].receipt).code(), Code::kNotFound);
  EXPECT_EQ(q().Nack(queue, NackRequest{got[0].receipt, 0, "x", false}).status().code(), Code::kNotFound);
  EXPECT_EQ(q().Touch(queue, got[0].receipt, std::nullopt).status().code(), Code::kNotFound);
  auto again = MustEnqueue(q(), queue, r);
  EXPECT_TRUE(again.duplicate) << "the key is kept for key_ttl_ms, as without keeping";
  EXPECT_EQ(again.id, made.id);
  EXPECT_EQ(q().Reschedule(queue, JobRef::ById(made.id), When{0, std::nullopt}).status().code(), Code::kConflict);
  EXPECT_TRUE(MustReserve(q(), queue, 10).empty()) << "a completed job is never delivered";

  QueueStats stats = MustStats(q(), queue);
  EXPECT_EQ(stats.completed, 1);
  EXPECT_EQ(stats.scheduled + stats.ready + stats.reserved + stats.dead, 0);

  h_->Restart();
  auto config = q().GetConfig(queue);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->keep_completed_ms, 3'600'000) << "the config is kept over a restart";
  job = q().Get(queue, JobRef::ById(made.id));
  ASSERT_TRUE(job.ok()) << "a restart keeps it: " << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kCompleted);
  EXPECT_EQ(job->result, R"({"charged": 1999, "ok": true})");
  EXPECT_EQ(MustStats(q(), queue).completed, 1);

  ASSERT_TRUE(q().Cancel(queue, JobRef::ById(made.id)).ok()) << "cancel deletes a completed job";
  EXPECT_EQ(q().Get(queue, JobRef::ById(made.id)).status().code(), Code::kNotFound);
  EXPECT_EQ(MustStats(q(), queue).completed, 0);
}

TEST_P(QueueConformance, WithoutKeepCompletedAnAckDeletesTheJobResultOrNot) {
  const std::string queue = QueueName();
  const EnqueueResult made = MustEnqueue(q(), queue, Job("x"));
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(AckWith(q(), queue, got[0].receipt, "42").ok());
  EXPECT_EQ(q().Get(queue, JobRef::ById(made.id)).status().code(), Code::kNotFound);
  EXPECT_EQ(MustStats(q(), queue).completed, 0);
  auto listed = q().ListJobs(queue, ListRequest{JobState::kCompleted, 10, {}});
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->jobs.empty());
}

TEST_P(QueueConformance, CompletedJobsAreListedByCompletionWithCursors) {
  const std::string queue = QueueName();
  KeepCompleted(q(), queue, 3'600'000);
  std::vector<std::string> order;
  for (int i = 0; i < 5; ++i) {
    MustEnqueue(q(), queue, Job(std::to_string(i)));
    auto got = MustReserve(q(), queue, 1);
    ASSERT_EQ(got.size(), 1u);
    // A batch: one with a result, one without (the same receipt twice counts once).
    std::vector<AckRequest> acks = {
        {got[0].receipt, i % 2 ? std::optional<std::string>(std::to_string(i)) : std::nullopt},
        {got[0].receipt, std::nullopt}};
    auto statuses = q().AckBatch(queue, acks);
    ASSERT_TRUE(statuses[0].ok()) << statuses[0].ToString();
    order.push_back(got[0].id);
    h_->Advance(1);
  }
  std::vector<std::string> seen;
  std::string cursor;
  do {
    auto page = q().ListJobs(queue, ListRequest{JobState::kCompleted, 2, cursor});
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const auto& j : page->jobs) {
      EXPECT_EQ(j.state, JobState::kCompleted);
      const int i = std::stoi(j.payload);
      EXPECT_EQ(j.result, i % 2 ? std::to_string(i) : "") << j.id;
      seen.push_back(j.id);
    }
    cursor = page->next_cursor;
  } while (!cursor.empty() && seen.size() < 10);
  std::vector<std::string> sorted = order;
  // By (completed_at, id): acked in this order, so this order (ties broken by id).
  EXPECT_EQ(seen.size(), 5u);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> seen_sorted = seen;
  std::sort(seen_sorted.begin(), seen_sorted.end());
  EXPECT_EQ(seen_sorted, sorted);
  if (h_->exact_time()) {
    EXPECT_EQ(seen, order);
  }
  // Completed jobs never keep a queue: deleted with it, without force.
  auto deleted = q().DeleteQueue(queue, false);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(q().Get(queue, JobRef::ById(order[0])).status().code(), Code::kNotFound);
}

TEST_P(QueueConformance, CompletedJobsAreDeletedOnceKeepCompletedRunsOut) {
  const std::string queue = QueueName();
  const int64_t keep = h_->exact_time() ? std::max<int64_t>(1'000, 4 * h_->unit_ms()) : 2'000;
  KeepCompleted(q(), queue, keep);
  MustEnqueue(q(), queue, Job("1"));
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(q().Ack(queue, got[0].receipt).ok());
  auto job = q().Get(queue, JobRef::ById(got[0].id));
  ASSERT_TRUE(job.ok());
  const int64_t not_before = job->completed_at_ms + keep;
  const int64_t step = h_->exact_time() ? 1 : 20;
  if (h_->NowMs() < not_before - step) h_->Advance(not_before - step - h_->NowMs());
  if (h_->NowMs() < not_before) {
    EXPECT_TRUE(q().Get(queue, JobRef::ById(got[0].id)).ok()) << "deleted before keep_completed_ms ran out";
  }
  for (int64_t waited = 0; waited <= 3'000; waited += step) {
    h_->Advance(step);
    auto j = q().Get(queue, JobRef::ById(got[0].id));
    if (!j.ok()) {
      EXPECT_EQ(j.code(), Code::kNotFound);
      EXPECT_GE(h_->NowMs(), not_before) << "deleted before keep_completed_ms ran out";
      EXPECT_EQ(MustStats(q(), queue).completed, 0);
      return;
    }
  }
  ADD_FAILURE() << "completed job still there 3 s after keep_completed_ms ran out";
}

TEST_P(QueueConformance, ABadResultIsRefusedBeforeTheAckChangesAnything) {
  const std::string queue = QueueName();
  KeepCompleted(q(), queue, 3'600'000);
  const EnqueueResult made = MustEnqueue(q(), queue, Job("x"));
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  const std::string deep = std::string(64, '[') + std::string(64, ']');
  const std::string too_deep = std::string(62, '[') + std::string(62, ']');  // would not fit a batch entry
  for (const std::string& bad : {std::string(""), std::string("{"), std::string("1 2"), std::string("\xff"), deep,
                                 too_deep, "\"" + std::string(Limits::kMaxResult - 1, 'a') + "\""}) {
    EXPECT_EQ(AckWith(q(), queue, got[0].receipt, bad).code(), Code::kInvalidArgument) << bad.substr(0, 20);
    auto job = q().Get(queue, JobRef::ById(made.id));
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->state, JobState::kReserved) << "refused before anything changed";
  }
  // Exactly at the limits: 65 536 bytes, 61 levels (in a batch, the form the workers send).
  const std::string edge = "\"" + std::string(Limits::kMaxResult - 2, 'a') + "\"";
  ASSERT_TRUE(AckWith(q(), queue, got[0].receipt, edge).ok());
  MustEnqueue(q(), queue, Job("y"));
  auto second = MustReserve(q(), queue, 1);
  ASSERT_EQ(second.size(), 1u);
  const std::string deepest = std::string(61, '[') + std::string(61, ']');
  const std::vector<AckRequest> batch = {{second[0].receipt, deepest}, {"not-a-receipt", std::nullopt}};
  auto statuses = q().AckBatch(queue, batch);
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].ToString();
  auto deep_job = q().Get(queue, JobRef::ById(second[0].id));
  ASSERT_TRUE(deep_job.ok());
  EXPECT_EQ(deep_job->result, deepest);
  auto job = q().Get(queue, JobRef::ById(made.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->result, edge);
}

// A page of completed jobs stops at Limits::kMaxListBytes counting their results (Redis and
// PostgreSQL counted only the payloads: 300 results of 64 KiB came in one page of 19.7 MB).
TEST_P(QueueConformance, AResultCountsTowardAPagesByteBound) {
  const std::string queue = QueueName();
  KeepCompleted(q(), queue, 3'600'000);
  constexpr size_t kJobs = 270;  // 270 x 64 KiB of results: over 16 MiB
  std::vector<EnqueueRequest> jobs(kJobs, Job("r"));
  ASSERT_TRUE(q().EnqueueBatch(queue, jobs).ok());
  std::vector<AckRequest> acks;
  const std::string result = "\"" + std::string(Limits::kMaxResult - 2, 'r') + "\"";
  for (int tries = 0; acks.size() < kJobs && tries < 100; ++tries) {
    auto got = q().Reserve(queue, ReserveRequest{.max = 1000, .wait_ms = 1000});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (const auto& d : *got) acks.push_back({d.receipt, result});
  }
  ASSERT_EQ(acks.size(), kJobs);
  for (size_t i = 0; i < acks.size(); i += 60) {  // bodies under 16 MiB over HTTP
    auto part = std::span(acks).subspan(i, std::min<size_t>(60, acks.size() - i));
    for (const Status& s : q().AckBatch(queue, part)) ASSERT_TRUE(s.ok()) << s.ToString();
  }
  auto page = q().ListJobs(queue, ListRequest{JobState::kCompleted, 1000, {}});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_LT(page->jobs.size(), kJobs) << "a page stops at 16 MiB of stored bytes, results included";
  EXPECT_FALSE(page->next_cursor.empty());
  size_t listed = page->jobs.size();
  while (!page->next_cursor.empty()) {
    page = q().ListJobs(queue, ListRequest{JobState::kCompleted, 1000, page->next_cursor});
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    listed += page->jobs.size();
  }
  EXPECT_EQ(listed, kJobs);
}

}  // namespace delayq::testing
