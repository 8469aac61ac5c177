// The Queue conformance suite (queue_conformance.h): queues: which calls make one, delete, stats,
// the due-time histogram, config, and the refusals every store words alike.
#include "conformance/queue_conformance.h"

#include "conformance/helpers.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/errors.h"
#include "core/validate.h"

namespace delayq::testing {
namespace {

using ::testing::Test;

// Reads, stats and reserves on a name that is not a queue create nothing (20 000 such names
// took RSS to 323 MiB). A reserve waiting on such a name is still answered when a job comes.
TEST_P(QueueConformance, ReadsAndReservesCreateNoQueue) {
  const std::string missing = QueueName() + "-missing", later = QueueName() + "-later";
  auto listed = [&](const std::string& name) {
    auto all = q().ListQueues();
    EXPECT_TRUE(all.ok());
    for (const auto& s : *all) {
      if (s.name == name) return true;
    }
    return false;
  };
  auto got = q().Reserve(missing, {});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->empty());
  EXPECT_EQ(q().Stats(missing).code(), Code::kNotFound);
  EXPECT_EQ(q().ListDead(missing, 10).code(), Code::kNotFound);
  EXPECT_EQ(q().Get(missing, JobRef::ByKey("k")).code(), Code::kNotFound);
  EXPECT_TRUE(q().GetConfig(missing).ok()) << "the defaults a new queue would get";
  EXPECT_EQ(q().Stats(missing).code(), Code::kNotFound) << "a read created the queue";
  EXPECT_FALSE(listed(missing));

  // A waiting reserve that is cancelled leaves nothing behind.
  ReserveRequest r;
  r.wait_ms = 60'000;
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto future = promise->get_future();
  const uint64_t handle = q().ReserveAsync(
      missing, r, [promise](Result<std::vector<Delivery>> res) { promise->set_value(std::move(res)); });
  q().CancelReserve(handle);
  auto cancelled = Await(future);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_TRUE(cancelled->empty());
  EXPECT_EQ(q().Stats(missing).code(), Code::kNotFound);
  EXPECT_FALSE(listed(missing));

  // One that waits is answered by the first enqueue, which creates the queue.
  auto waiting = ReserveWaiting(q(), later, 60'000);
  EnqueueResult e = MustEnqueue(q(), later, Job("first"));
  auto answered = Await(waiting);
  ASSERT_TRUE(answered.ok()) << answered.status().ToString();
  ASSERT_EQ(answered->size(), 1u);
  EXPECT_EQ((*answered)[0].id, e.id);
  EXPECT_TRUE(listed(later));
}

// DELETE /v1/queues/{q}: an empty queue goes with its config; one holding jobs is a conflict
// unless forced, which deletes every job in every state. The name is then free: a reserve
// waiting on it is answered by the next enqueue, and its keys and config start afresh.
TEST_P(QueueConformance, DeleteQueueEmptyOrForced) {
  const std::string queue = QueueName(), empty = QueueName() + "-empty";
  EXPECT_EQ(q().DeleteQueue(QueueName() + "-none", false).code(), Code::kNotFound);
  const int32_t default_attempts = q().GetConfig(QueueName() + "-fresh")->max_attempts;

  QueueConfig config;
  config.max_attempts = 1;
  ASSERT_TRUE(q().SetConfig(empty, config).ok());
  auto none = q().DeleteQueue(empty, false);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, 0);
  EXPECT_EQ(q().Stats(empty).code(), Code::kNotFound);
  EXPECT_EQ(q().GetConfig(empty)->max_attempts, default_attempts) << "the config outlived its queue";

  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  EnqueueRequest dies = Job("dies");
  ASSERT_TRUE(q().Enqueue(queue, dies).ok());
  auto d = MustReserve(q(), queue);
  ASSERT_EQ(d.size(), 1u);
  ASSERT_TRUE(q().Nack(queue, {d[0].receipt, std::nullopt, "boom", false}).ok());  // dead
  EnqueueRequest keyed = Job("held");
  keyed.key = "k";
  EnqueueResult held_job = MustEnqueue(q(), queue, keyed);
  auto held = MustReserve(q(), queue);  // reserved
  ASSERT_EQ(held.size(), 1u);
  MustEnqueue(q(), queue, Job("ready"));
  MustEnqueue(q(), queue, Job("later", 100 * h_->unit_ms()));  // scheduled
  EXPECT_EQ(q().DeleteQueue(queue, false).code(), Code::kConflict);
  QueueStats before = MustStats(q(), queue);
  EXPECT_EQ(before.ready + before.reserved + before.scheduled + before.dead, 4) << "a refused delete changed the queue";

  auto forced = q().DeleteQueue(queue, true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ(*forced, 4);
  EXPECT_EQ(q().Stats(queue).code(), Code::kNotFound);
  EXPECT_EQ(q().Get(queue, JobRef::ById(held_job.id)).code(), Code::kNotFound);
  EXPECT_FALSE(q().Ack(queue, held[0].receipt).ok()) << "a receipt of a deleted job acted";
  auto all = q().ListQueues();
  ASSERT_TRUE(all.ok());
  for (const auto& s : *all) EXPECT_NE(s.name, queue);

  auto waiting = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult again = MustEnqueue(q(), queue, keyed);
  EXPECT_FALSE(again.duplicate) << "the key outlived its queue";
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, again.id);
  EXPECT_EQ((*got)[0].max_attempts, default_attempts) << "the config outlived its queue";
  QueueStats after = MustStats(q(), queue);
  EXPECT_EQ(after.reserved, 1);
  EXPECT_EQ(after.dead, 0);
}

TEST_P(QueueConformance, StatsCountEveryState) {
  const std::string queue = QueueName();
  const int64_t u = h_->unit_ms();
  EXPECT_EQ(q().Stats(queue).code(), Code::kNotFound);
  MustEnqueue(q(), queue, Job("s1", 30'000));  // due within 60 s, and not during a slow run (TSan)
  MustEnqueue(q(), queue, Job("s2", 200'000));
  MustEnqueue(q(), queue, Job("r1"));
  MustEnqueue(q(), queue, Job("r2"));
  EnqueueRequest dead = Job("d1");
  dead.max_attempts = 1;
  MustEnqueue(q(), queue, dead);
  auto got = MustReserve(q(), queue, 3);  // r1, r2, d1 in any order
  ASSERT_EQ(got.size(), 3u);
  for (const auto& d : got) {
    if (d.payload == "r1") {
      ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
    } else if (d.payload == "d1") {
      ASSERT_TRUE(q().Nack(queue, {d.receipt, std::nullopt, "x", false}).ok());
    }
  }

  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.name, queue);
  EXPECT_EQ(s.scheduled, 2);
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(s.reserved, 1);
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.due_next_60s, 1);
  ASSERT_TRUE(s.earliest_due_at_ms.has_value());
  EXPECT_GT(*s.earliest_due_at_ms, h_->NowMs());
  EXPECT_EQ(s.counters.enqueued, 5u);
  EXPECT_EQ(s.counters.delivered, 3u);
  EXPECT_EQ(s.counters.acked, 1u);
  EXPECT_EQ(s.counters.nacked, 1u);
  EXPECT_EQ(s.counters.dead, 1u);
  EXPECT_EQ(s.lateness.count, 3u);

  MustEnqueue(q(), queue, Job("r3"));
  h_->Advance(u);
  s = MustStats(q(), queue);
  EXPECT_EQ(s.ready, 1);
  EXPECT_GE(s.oldest_ready_ms, u - 1);

  auto all = q().ListQueues();
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(
      std::any_of(all->begin(), all->end(), [&](const QueueStats& x) { return x.name == queue && x.dead == 1; }));
}

TEST_P(QueueConformance, ScheduleCountsJobsByDueTime) {
  const std::string queue = QueueName();
  for (int i = 0; i < 3; ++i) MustEnqueue(q(), queue, Job("soon", 10 * 60'000 + i));
  for (int i = 0; i < 2; ++i) MustEnqueue(q(), queue, Job("later", 90 * 60'000));
  MustEnqueue(q(), queue, Job("much later", 3 * 86'400'000));
  auto h = q().Schedule(queue, 3'600'000, 24);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->buckets.size(), 24u);
  int64_t total = 0;
  for (int64_t b : h->buckets) total += b;
  EXPECT_EQ(total, 5);
  EXPECT_EQ(h->later, 1);
  EXPECT_EQ(h->buckets[0] + h->buckets[1], 5);
  EXPECT_EQ(q().Schedule(queue, 1234, 10).code(), Code::kInvalidArgument);
}

TEST_P(QueueConformance, ConfigIsStoredAndApplied) {
  const std::string queue = QueueName();
  auto defaults = q().GetConfig(queue);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(*defaults, QueueConfig{});
  QueueConfig c;
  c.max_attempts = 3;
  c.lease_ms = 2000;
  c.max_payload = 10;
  c.backoff = {500, 3.0, 60'000, 0.2};
  ASSERT_TRUE(q().SetConfig(queue, c).ok());
  auto got = q().GetConfig(queue);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, c);
  EXPECT_EQ(q().Enqueue(queue, Job("eleven byte")).code(), Code::kTooLarge);
  MustEnqueue(q(), queue, Job("ten bytes!"));
  const int64_t before = h_->NowMs();
  auto d = MustReserve(q(), queue);
  const int64_t after = h_->NowMs();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].max_attempts, 3);
  // The queue's lease (2 s), taken during the reserve (a few ms of slack: the store's clock and
  // this one round to milliseconds apart).
  EXPECT_GE(d[0].lease_deadline_ms, before + 2000 - 5);
  EXPECT_LE(d[0].lease_deadline_ms, after + 2000 + 5);
}

TEST_P(QueueConformance, BadInputIsRefusedAndChangesNothing) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("keep"));
  const QueueStats before = MustStats(q(), queue);
  auto code = [&](const EnqueueRequest& r) { return q().Enqueue(queue, r).code(); };
  EXPECT_EQ(code(Job("")), Code::kInvalidArgument);
  EXPECT_EQ(code(Job("x", -1)), Code::kInvalidArgument);
  EXPECT_EQ(code(Job("x", 366LL * 86'400'000)), Code::kInvalidArgument);
  EXPECT_EQ(code(Job(std::string((1 << 20) + 1, 'x'))), Code::kTooLarge);
  EnqueueRequest both = Job("x", 5);
  both.when.deliver_at_ms = h_->NowMs();
  EXPECT_EQ(code(both), Code::kInvalidArgument);
  EnqueueRequest attempts = Job("x");
  attempts.max_attempts = 0;
  EXPECT_EQ(code(attempts), Code::kInvalidArgument);
  EnqueueRequest long_key = Job("x");
  long_key.key = std::string(600, 'k');
  EXPECT_EQ(code(long_key), Code::kInvalidArgument);
  EXPECT_EQ(q().Enqueue("bad queue name", Job("x")).code(), Code::kInvalidArgument);
  EXPECT_EQ(q().Enqueue(std::string(129, 'q'), Job("x")).code(), Code::kInvalidArgument);
  EXPECT_EQ(q().Enqueue("", Job("x")).code(), Code::kInvalidArgument);

  // A batch with one bad job stores none of them.
  std::vector<EnqueueRequest> batch = {Job("ok1"), Job("ok2"), Job("", 0)};
  auto res = q().EnqueueBatch(queue, batch);
  EXPECT_EQ(res.code(), Code::kInvalidArgument);
  EXPECT_NE(res.status().message().find("jobs[2]"), std::string::npos) << res.status().message();

  ReserveRequest rr;
  rr.max = 0;
  EXPECT_EQ(q().Reserve(queue, rr).code(), Code::kInvalidArgument);
  rr.max = 1001;
  EXPECT_EQ(q().Reserve(queue, rr).code(), Code::kInvalidArgument);
  rr.max = 1;
  rr.lease_ms = 5;
  EXPECT_EQ(q().Reserve(queue, rr).code(), Code::kInvalidArgument);
  rr.lease_ms.reset();
  rr.wait_ms = 60'001;
  EXPECT_EQ(q().Reserve(queue, rr).code(), Code::kInvalidArgument);

  QueueConfig bad;
  bad.max_attempts = 0;
  EXPECT_EQ(q().SetConfig(queue, bad).code(), Code::kInvalidArgument);

  const QueueStats after = MustStats(q(), queue);
  EXPECT_EQ(after.ready, before.ready);
  EXPECT_EQ(after.scheduled, before.scheduled);
  EXPECT_EQ(after.counters.enqueued, before.counters.enqueued);
  auto cfg = q().GetConfig(queue);
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->max_attempts, QueueConfig{}.max_attempts);
  EXPECT_EQ(q().Stats("bad queue name").code(), Code::kInvalidArgument);
}

// Every store words the same failure the same way: the texts come from core/errors.h and
// core/validate.h, and the Redis store's scripts hand back codes (and Redis' clock where a text
// needs it) rather than words of their own. Some texts differed; each case here failed on Redis.
TEST_P(QueueConformance, ErrorMessagesAreTheSameOnEveryStore) {
  const std::string queue = QueueName();
  auto expect_text = [](const Status& got, const Status& want, const char* what) {
    EXPECT_EQ(got.code(), want.code()) << what << ": " << got.ToString();
    EXPECT_EQ(got.message(), want.message()) << what;
  };
  QueueConfig config;
  config.max_attempts = 2;
  config.lease_ms = h_->exact_time() ? 1'000 : 3'000;  // room for the calls made while it holds
  ASSERT_TRUE(q().SetConfig(queue, config).ok());

  expect_text(q().Get("conf.no-such-queue." + std::to_string(::getpid()), JobRef::ById("x")).status(),
              errors::UnknownQueue("conf.no-such-queue." + std::to_string(::getpid())), "unknown queue");
  expect_text(q().Get(queue, JobRef::ById("nope")).status(), errors::NotAJobId("id", "nope"), "bad id");
  // Redis and PostgreSQL had looked for the job of key "" (kNotFound), the embedded store refused it.
  expect_text(q().Get(queue, JobRef::ByKey("")).status(), Status::InvalidArgument("give a job id or a key"),
              "neither id nor key");
  expect_text(q().Get(queue, JobRef::ByKey("no-such-key")).status(), errors::NoJobWithKey(queue, "no-such-key"),
              "unknown key");

  // A job that was acked: its id names nothing any more, and its receipt is over.
  MustEnqueue(q(), queue, Job("gone"));
  auto gone = MustReserve(q(), queue, 1);
  ASSERT_EQ(gone.size(), 1u);
  ASSERT_TRUE(q().Ack(queue, gone[0].receipt).ok());
  expect_text(q().Get(queue, JobRef::ById(gone[0].id)).status(), errors::NoSuchJob(queue, gone[0].id), "acked id");
  expect_text(q().Ack(queue, gone[0].receipt), errors::DeliveryJobGone(gone[0].id), "receipt of an acked job");

  // A reserved job: no cancel, reschedule or replace.
  EnqueueRequest keyed = Job("held");
  keyed.key = "held-key";
  MustEnqueue(q(), queue, keyed);
  auto held = MustReserve(q(), queue, 1);
  ASSERT_EQ(held.size(), 1u);
  expect_text(q().Cancel(queue, JobRef::ById(held[0].id)), errors::ReservedCannotCancel(held[0].id), "cancel reserved");
  expect_text(q().Reschedule(queue, JobRef::ById(held[0].id), {.delay_ms = 5}).status(),
              errors::ReservedCannotReschedule(held[0].id), "reschedule reserved");
  keyed.replace = true;
  expect_text(q().Enqueue(queue, keyed).status(), errors::ReservedCannotReplace("", "held-key", held[0].id),
              "replace reserved");

  // Its lease runs out and it is delivered again: the old receipt names an earlier delivery.
  h_->Advance(config.lease_ms + h_->unit_ms());
  std::vector<Delivery> again;
  for (int i = 0; i < 50 && again.empty(); ++i) {
    again = MustReserve(q(), queue, 1);
    if (again.empty()) h_->Advance(h_->unit_ms() / 10 + 1);
  }
  ASSERT_EQ(again.size(), 1u);
  expect_text(q().Ack(queue, held[0].receipt), errors::DeliveredAgain(held[0].id, 2), "receipt delivered again");
  // Nacked on its last attempt: dead, and no reschedule for a dead job.
  auto nacked = q().Nack(queue, {.receipt = again[0].receipt, .error = "boom"});
  ASSERT_TRUE(nacked.ok() && nacked->state == JobState::kDead);
  expect_text(q().Ack(queue, again[0].receipt), errors::DeliveryWentDead(held[0].id, 2, 2), "receipt of a dead job");
  expect_text(q().Reschedule(queue, JobRef::ById(held[0].id), {.delay_ms = 5}).status(),
              errors::DeadCannotReschedule(held[0].id), "reschedule dead");

  // Nacked with attempts left: scheduled again, its receipt is over.
  MustEnqueue(q(), queue, Job("retried"));
  auto retried = MustReserve(q(), queue, 1);
  ASSERT_EQ(retried.size(), 1u);
  ASSERT_TRUE(q().Nack(queue, {.receipt = retried[0].receipt, .retry_in_ms = 60'000}).ok());
  expect_text(q().Ack(queue, retried[0].receipt), errors::DeliveryOver(retried[0].id), "receipt of a nacked job");

  // Input rules.
  MustEnqueue(q(), queue, Job("nacked"));
  auto to_nack = MustReserve(q(), queue, 1);
  ASSERT_EQ(to_nack.size(), 1u);
  const NackRequest far_nack{.receipt = to_nack[0].receipt, .retry_in_ms = config.max_delay_ms + 1};
  expect_text(q().Nack(queue, far_nack).status(), ValidateNack(far_nack, config), "retry_in_ms too far");
  EnqueueRequest both = Job("both");
  both.when = {.delay_ms = 5, .deliver_at_ms = h_->NowMs()};
  expect_text(q().Enqueue(queue, both).status(), ValidateWhen(both.when, config), "delay and deliver_at");
  expect_text(q().EnqueueBatch(queue, {}).status(), ValidateBatchSize(0), "empty batch");
  // In a batch, the message names the entry that is wrong, and nothing of the batch is written.
  const int64_t scheduled_before = MustStats(q(), queue).scheduled;
  std::vector<EnqueueRequest> bad_entry = {Job("fine-0", 60'000), Job("fine-1", 60'000), Job("bad-key", 60'000)};
  bad_entry[2].key = std::string(Limits::kMaxKey + 1, 'k');
  expect_text(q().EnqueueBatch(queue, bad_entry).status(), ValidateEnqueue(bad_entry[2], config, "jobs[2]."),
              "batch entry with a long key");
  bad_entry[2] = Job("bad-when", 60'000);
  bad_entry[2].when.deliver_at_ms = h_->NowMs();
  expect_text(q().EnqueueBatch(queue, bad_entry).status(), ValidateWhen(bad_entry[2].when, config, "jobs[2]."),
              "batch entry with delay and deliver_at");
  EXPECT_NE(q().EnqueueBatch(queue, bad_entry).status().message().find("jobs[2]."), std::string::npos);
  EXPECT_EQ(MustStats(q(), queue).scheduled, scheduled_before) << "a refused batch wrote nothing";
  expect_text(q().Schedule(queue, 30'000, 10).status(), ValidateScheduleHistogram(30'000, 10), "histogram bucket");
  const std::vector<std::string> ids = {held[0].id, "bad"};
  expect_text(q().ReplayDead(queue, ids).status(), errors::NotAJobId("ids[1]", "bad"), "replay id");

  // A deliver_at past max_delay_ms: the same words, at the store's own now (Redis' clock on Redis),
  // so the "... from now" part may differ by the time between the two clocks' readings.
  const int64_t far = h_->NowMs() + config.max_delay_ms + 86'400'000;
  auto expect_too_far = [&](const Status& got, const char* what) {
    const Status want = ResolveDue({.deliver_at_ms = far}, h_->NowMs(), config).status();
    EXPECT_EQ(got.code(), Code::kInvalidArgument) << what << ": " << got.ToString();
    const std::string& w = want.message();
    const std::string head = w.substr(0, w.find(" is ") + 4), tail = w.substr(w.find(" from now"));
    EXPECT_EQ(got.message().substr(0, head.size()), head) << what;
    EXPECT_TRUE(got.message().ends_with(tail)) << what << ": " << got.message();
  };
  EnqueueRequest too_far = Job("far");
  too_far.when.deliver_at_ms = far;
  expect_too_far(q().Enqueue(queue, too_far).status(), "enqueue deliver_at too far");
  auto scheduled = MustEnqueue(q(), queue, Job("later", 60'000));
  expect_too_far(q().Reschedule(queue, JobRef::ById(scheduled.id), {.deliver_at_ms = far}).status(),
                 "reschedule deliver_at too far");

  // A queue that holds jobs (here: one scheduled, one reserved, one dead) is not deleted.
  auto stats = MustStats(q(), queue);
  expect_text(q().DeleteQueue(queue, false).status(),
              errors::QueueNotEmpty(queue, stats.scheduled + stats.ready + stats.reserved + stats.dead), "delete");
}

}  // namespace
}  // namespace delayq::testing
