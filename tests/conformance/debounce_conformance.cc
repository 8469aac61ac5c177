// The conformance suite, debounce (EnqueueRequest::debounce) on every store: each event with the
// key pushes the live job back, never earlier, taking the event's payload; beside it the two
// other ways a key answers (dedupe keeps the first, replace takes the last due time).
#include <gtest/gtest.h>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

EnqueueRequest Event(const std::string& key, std::string payload, int64_t delay_ms, bool debounce, bool replace) {
  EnqueueRequest r = Job(std::move(payload), delay_ms);
  r.key = key;
  r.debounce = debounce;
  r.replace = replace;
  return r;
}

std::string PayloadOf(Queue& q, const std::string& queue, const std::string& key) {
  auto job = q.Get(queue, JobRef::ByKey(key));
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? job->payload : "";
}

}  // namespace

TEST_P(QueueConformance, DebounceMovesTheDueTimeLaterNeverEarlier) {
  const std::string queue = QueueName();
  const int64_t u = h_->unit_ms();
  const EnqueueResult first = MustEnqueue(q(), queue, Event("k", "\"first\"", 10 * u, true, false));
  EXPECT_FALSE(first.duplicate) << "the first event makes the job";

  // A later event pushes it back and brings its payload; the job keeps its id.
  const int64_t before = h_->NowMs();
  const EnqueueResult pushed = MustEnqueue(q(), queue, Event("k", "\"second\"", 20 * u, true, false));
  EXPECT_TRUE(pushed.duplicate);
  EXPECT_TRUE(pushed.replaced);
  EXPECT_EQ(pushed.id, first.id);
  EXPECT_GE(pushed.due_at_ms, before + 20 * u);
  EXPECT_GT(pushed.due_at_ms, first.due_at_ms);
  EXPECT_EQ(PayloadOf(q(), queue, "k"), "\"second\"");

  // An event with a shorter delay takes the payload but not the earlier time.
  const EnqueueResult shorter = MustEnqueue(q(), queue, Event("k", "\"third\"", 5 * u, true, false));
  EXPECT_EQ(shorter.id, first.id);
  EXPECT_EQ(shorter.due_at_ms, pushed.due_at_ms);
  EXPECT_EQ(PayloadOf(q(), queue, "k"), "\"third\"");
  auto job = q().Get(queue, JobRef::ByKey("k"));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->due_at_ms, pushed.due_at_ms);

  // Beside it: dedupe keeps the job as it is; replace takes the event's time, earlier too.
  const EnqueueResult deduped = MustEnqueue(q(), queue, Event("k", "\"dedupe\"", 1 * u, false, false));
  EXPECT_TRUE(deduped.duplicate);
  EXPECT_FALSE(deduped.replaced);
  EXPECT_EQ(deduped.due_at_ms, pushed.due_at_ms);
  EXPECT_EQ(PayloadOf(q(), queue, "k"), "\"third\"");
  const EnqueueResult replaced = MustEnqueue(q(), queue, Event("k", "\"replace\"", 5 * u, false, true));
  EXPECT_TRUE(replaced.replaced);
  EXPECT_LT(replaced.due_at_ms, pushed.due_at_ms) << "replace moves it earlier; debounce would not";
  EXPECT_EQ(MustStats(q(), queue).scheduled, 1) << "one job all along";
}

TEST_P(QueueConformance, DebounceTakesAReadyJobBackAndIsRefusedForAReservedOne) {
  const std::string queue = QueueName();
  const int64_t u = h_->unit_ms();
  const EnqueueResult ready = MustEnqueue(q(), queue, Event("ready", "\"now\"", 0, true, false));
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 1; });
  const EnqueueResult back = MustEnqueue(q(), queue, Event("ready", "\"later\"", 50 * u, true, false));
  EXPECT_EQ(back.id, ready.id);
  auto job = q().Get(queue, JobRef::ByKey("ready"));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kScheduled) << "a ready job goes back to waiting for its new time";
  EXPECT_TRUE(MustReserve(q(), queue).empty());

  MustEnqueue(q(), queue, Event("busy", "\"x\"", 0, false, false));
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 1; });
  ASSERT_EQ(MustReserve(q(), queue).size(), 1u);
  auto busy = q().Enqueue(queue, Event("busy", "\"y\"", 10 * u, true, false));
  EXPECT_EQ(busy.code(), Code::kConflict) << "the job is being handled: as for replace";

  EnqueueRequest keyless = Job("\"x\"");
  keyless.debounce = true;
  auto refused = q().Enqueue(queue, keyless);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("debounce"), std::string::npos) << refused.status().message();
}

}  // namespace delayq::testing
