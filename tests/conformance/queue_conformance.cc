// The Queue conformance suite (see queue_conformance.h). Each test uses its own queue name,
// so stores that are shared between tests (a Redis server, an HTTP server) stay correct.
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

// A reserve of up to 10 jobs whose answer stops at `max_bytes`.
std::vector<Delivery> MustReserveBytes(Queue& q, const std::string& queue, int64_t max_bytes) {
  ReserveRequest r;
  r.max = 10;
  r.max_bytes = max_bytes;
  auto res = q.Reserve(queue, r);
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return res.ok() ? *res : std::vector<Delivery>{};
}

// Reserves until `n` jobs were received, letting time pass in small steps.
std::vector<Delivery> ReceiveAll(QueueHarness& h, const std::string& queue, size_t n, int64_t step_ms,
                                 int max_steps = 400) {
  std::vector<Delivery> got;
  for (int i = 0; i < max_steps && got.size() < n; ++i) {
    auto batch = MustReserve(h.queue(), queue);
    const int64_t now = h.NowMs();
    for (auto& d : batch) {
      EXPECT_GE(now, d.due_at_ms) << "job " << d.id << " delivered before it was due";
      got.push_back(std::move(d));
    }
    if (got.size() < n) h.Advance(step_ms);
  }
  return got;
}

TEST_P(QueueConformance, EnqueueThenGetReturnsTheJobAsStored) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job(std::string("bin\0ary\xff", 8), 10 * h_->unit_ms());
  r.headers = {{"version", "2"}, {"trace", "abc"}};
  r.key = "order-42";
  r.max_attempts = 7;
  const int64_t before = h_->NowMs();
  EnqueueResult e = MustEnqueue(q(), queue, r);
  EXPECT_EQ(e.id.size(), 26u);
  EXPECT_FALSE(e.duplicate);
  EXPECT_GE(e.due_at_ms, before + 10 * h_->unit_ms());

  auto job = q().Get(queue, JobRef::ById(e.id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->id, e.id);
  EXPECT_EQ(job->queue, queue);
  EXPECT_EQ(job->state, JobState::kScheduled);
  EXPECT_EQ(job->payload, std::string("bin\0ary\xff", 8));
  EXPECT_EQ(job->headers, r.headers);
  EXPECT_EQ(job->key, "order-42");
  EXPECT_EQ(job->max_attempts, 7);
  EXPECT_EQ(job->attempt, 0);
  EXPECT_EQ(job->due_at_ms, e.due_at_ms);
  EXPECT_GE(job->created_at_ms, before);

  auto by_key = q().Get(queue, JobRef::ByKey("order-42"));
  ASSERT_TRUE(by_key.ok()) << by_key.status().ToString();
  EXPECT_EQ(by_key->id, e.id);

  EXPECT_EQ(q().Get(queue, JobRef::ById("01JDQ8Z3K6T6V3W1C9X2N4M5PQ")).code(), Code::kNotFound);
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("nope")).code(), Code::kNotFound);
  EXPECT_EQ(q().Get(queue, JobRef::ById("not-an-id")).code(), Code::kInvalidArgument);
}

TEST_P(QueueConformance, NeverEarly) {
  const std::string queue = QueueName();
  const int64_t u = h_->unit_ms();
  EnqueueResult late = MustEnqueue(q(), queue, Job("late", 3 * u));
  EnqueueResult soon = MustEnqueue(q(), queue, Job("soon", 1 * u));
  EnqueueResult mid = MustEnqueue(q(), queue, Job("mid", 2 * u));
  EXPECT_TRUE(MustReserve(q(), queue).empty()) << "delivered before any job was due";
  if (h_->exact_time()) {
    h_->Advance(u - 1);
    EXPECT_TRUE(MustReserve(q(), queue).empty()) << "delivered 1 ms early";
    h_->Advance(1);
    auto got = MustReserve(q(), queue);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].id, soon.id);
    h_->Advance(u - 1);
    EXPECT_TRUE(MustReserve(q(), queue).empty()) << "delivered 1 ms early";
    h_->Advance(1);
    got = MustReserve(q(), queue);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].id, mid.id);
    h_->Advance(u);
    got = MustReserve(q(), queue);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].id, late.id);
  } else {
    auto got = ReceiveAll(*h_, queue, 3, u / 3);
    ASSERT_EQ(got.size(), 3u);
    if (h_->ordered()) {
      EXPECT_EQ(got[0].id, soon.id);
      EXPECT_EQ(got[1].id, mid.id);
      EXPECT_EQ(got[2].id, late.id);
    }
  }
}

TEST_P(QueueConformance, JobsWithoutDelayOrWithAPastTimeAreReadyAtOnce) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("now"));
  EnqueueRequest past = Job("past");
  past.when.deliver_at_ms = h_->NowMs() - 3'600'000;
  EnqueueResult e = MustEnqueue(q(), queue, past);
  EXPECT_GE(e.due_at_ms, h_->NowMs() - 1000) << "a past deliver_at means due now";
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 2u);
  if (!h_->ordered() && got[0].payload == "past") std::swap(got[0], got[1]);
  EXPECT_EQ(got[0].payload, "now");
  EXPECT_EQ(got[1].payload, "past");
  EXPECT_EQ(got[0].attempt, 1);
}

TEST_P(QueueConformance, FifoAmongEqualDueTimes) {
  const std::string queue = QueueName();
  const int64_t at = h_->NowMs() + 5 * h_->unit_ms();
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    EnqueueRequest r = Job("job-" + std::to_string(i));
    r.when.deliver_at_ms = at;
    ids.push_back(MustEnqueue(q(), queue, r).id);
  }
  auto got = ReceiveAll(*h_, queue, ids.size(), h_->unit_ms());
  ASSERT_EQ(got.size(), ids.size());
  if (!h_->ordered()) {  // every job, in some order
    std::set<std::string> a(ids.begin(), ids.end()), b;
    for (auto& d : got) b.insert(d.id);
    EXPECT_EQ(a, b);
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(got[i].id, ids[i]) << "position " << i;
}

TEST_P(QueueConformance, EveryJobIsDeliveredOnceWhenAcked) {
  const std::string queue = QueueName();
  std::mt19937 rng(7);
  std::set<std::string> ids;
  std::vector<EnqueueRequest> batch;
  for (int i = 0; i < 300; ++i) {
    batch.push_back(Job("p" + std::to_string(i), std::uniform_int_distribution<int64_t>(0, 5 * h_->unit_ms())(rng)));
    if (batch.size() == 100) {
      auto res = q().EnqueueBatch(queue, batch);
      ASSERT_TRUE(res.ok()) << res.status().ToString();
      for (auto& e : *res) ids.insert(e.id);
      batch.clear();
    }
  }
  ASSERT_EQ(ids.size(), 300u);
  std::set<std::string> seen;
  for (int step = 0; step < 100 && seen.size() < ids.size(); ++step) {
    auto got = MustReserve(q(), queue);
    const int64_t now = h_->NowMs();
    std::vector<std::string> receipts;
    for (auto& d : got) {
      EXPECT_GE(now, d.due_at_ms) << "delivered early";
      EXPECT_TRUE(seen.insert(d.id).second) << "delivered twice: " << d.id;
      receipts.push_back(d.receipt);
    }
    for (const Status& s : q().AckBatch(queue, receipts)) EXPECT_TRUE(s.ok()) << s.ToString();
    if (seen.size() < ids.size()) h_->Advance(h_->unit_ms() / 2);
  }
  EXPECT_EQ(seen, ids);
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.scheduled + s.ready + s.reserved, 0);
  EXPECT_EQ(s.counters.acked, 300u);
}

TEST_P(QueueConformance, LeaseExpiryRedeliversAndBumpsAttempt) {
  const std::string queue = QueueName();
  EnqueueResult e = MustEnqueue(q(), queue, Job("work"));
  auto first = MustReserve(q(), queue, 1, 1000);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].attempt, 1);
  EXPECT_TRUE(MustReserve(q(), queue).empty()) << "a reserved job was handed out twice";
  auto job = q().Get(queue, JobRef::ById(e.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReserved);
  if (h_->exact_time()) {
    h_->Advance(999);
    EXPECT_TRUE(MustReserve(q(), queue).empty()) << "redelivered before the lease ran out";
    h_->Advance(1);
  } else {
    h_->Advance(1100);
  }
  auto second = ReserveEventually(*h_, queue, 1, 1, 1000);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].id, e.id);
  EXPECT_EQ(second[0].attempt, 2);
  EXPECT_NE(second[0].receipt, first[0].receipt);

  EXPECT_EQ(q().Ack(queue, first[0].receipt).code(), Code::kLeaseExpired);
  EXPECT_EQ(q().Touch(queue, first[0].receipt, std::nullopt).code(), Code::kLeaseExpired);
  NackRequest stale{first[0].receipt, 0, "stale", false};
  EXPECT_EQ(q().Nack(queue, stale).code(), Code::kLeaseExpired);
  EXPECT_TRUE(q().Ack(queue, second[0].receipt).ok());
  EXPECT_EQ(q().Ack(queue, second[0].receipt).code(), Code::kNotFound);
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.counters.redelivered, 1u);
  EXPECT_EQ(s.counters.delivered, 2u);
}

// Redeliveries after a lease ran out keep the byte bound too (on Redis, the claim of pending
// entries is sized before it is made).
TEST_P(QueueConformance, RedeliveriesKeepTheMaxBytesBound) {
  const std::string queue = QueueName();
  for (int i = 0; i < 3; ++i) MustEnqueue(q(), queue, Job("\"" + std::string(100'000, 'r') + "\""));
  ASSERT_EQ(MustReserve(q(), queue, 10, 1000).size(), 3u);
  h_->Advance(h_->exact_time() ? 1000 : 1100);
  // On a real clock the store's reaper gives the jobs back a moment after their leases ran out
  // (later on a loaded machine): let time pass in small steps until it has.
  auto one = MustReserveBytes(q(), queue, 150'000);
  for (int i = 0; i < 100 && one.empty() && !h_->exact_time(); ++i) {
    h_->Advance(50);
    one = MustReserveBytes(q(), queue, 150'000);
  }
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].attempt, 2);
  auto rest = MustReserve(q(), queue, 10);
  ASSERT_EQ(rest.size(), 2u);
  for (const auto& d : rest) EXPECT_EQ(d.attempt, 2);
}

TEST_P(QueueConformance, AckAfterLeaseExpirySucceedsUntilSomeoneElseReceivesTheJob) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("a"));
  auto got = MustReserve(q(), queue, 1, 1000);
  ASSERT_EQ(got.size(), 1u);
  h_->Advance(h_->exact_time() ? 1000 : 1100);
  auto stats = StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 1; });
  EXPECT_EQ(stats.ready, 1);
  EXPECT_EQ(stats.reserved, 0);
  EXPECT_TRUE(q().Ack(queue, got[0].receipt).ok()) << "the late ack should still count";
  EXPECT_TRUE(MustReserve(q(), queue).empty());
  stats = MustStats(q(), queue);
  EXPECT_EQ(stats.ready + stats.reserved + stats.scheduled, 0);
}

TEST_P(QueueConformance, ReceiptErrorsAreDistinct) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("a"));
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(q().Ack(queue, "garbage").code(), Code::kInvalidArgument);
  EXPECT_EQ(q().Ack(queue, "").code(), Code::kInvalidArgument);
  EXPECT_TRUE(q().Ack(queue, got[0].receipt).ok());
  EXPECT_EQ(q().Ack(queue, got[0].receipt).code(), Code::kNotFound);
  auto batch = q().AckBatch(queue, std::vector<std::string>{got[0].receipt, "x"});
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].code(), Code::kNotFound);
  EXPECT_EQ(batch[1].code(), Code::kInvalidArgument);
}

// A receipt is the job id and 128 random bits: a client holding one receipt cannot make
// another that acts (the tokens came from a seeded mt19937, and a client rebuilt its state from
// 312 receipts and acked another consumer's job). A changed token acts on nothing, and
// swapping two deliveries' tokens does not work either.
TEST_P(QueueConformance, AReceiptWithAnyOtherTokenActsOnNothing) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("a"));
  MustEnqueue(q(), queue, Job("b"));
  auto got = MustReserve(q(), queue, 2);
  ASSERT_EQ(got.size(), 2u);
  const std::string& a = got[0].receipt;
  const std::string& b = got[1].receipt;
  ASSERT_EQ(a.size(), 26u + 1 + 32 + 1 + 16) << a;  // id . token . tag
  EXPECT_NE(a.substr(27), b.substr(27));
  std::vector<std::string> forged;
  for (size_t i : {27u, 40u, 58u, 60u, 75u}) {  // one hex digit changed: token, then tag
    std::string f = a;
    f[i] = f[i] == '0' ? '1' : '0';
    forged.push_back(f);
  }
  forged.push_back(a.substr(0, 27) + b.substr(27));          // a's id with b's token and tag
  forged.push_back(b.substr(0, 27) + a.substr(27));          // b's id with a's token and tag
  forged.push_back(a.substr(0, 27 + 32));                    // a's token without its tag
  forged.push_back(a.substr(0, 27) + a.substr(27 + 16));     // half of a's token
  forged.push_back(a.substr(0, 27) + std::string(16, 'f'));  // a 64-bit guess
  for (const std::string& f : forged) {
    const Status s = q().Ack(queue, f);
    EXPECT_FALSE(s.ok()) << f;
    EXPECT_TRUE(s.code() == Code::kLeaseExpired || s.code() == Code::kInvalidArgument) << s.ToString();
    EXPECT_FALSE(q().Touch(queue, f, std::nullopt).ok()) << f;
    NackRequest n;
    n.receipt = f;
    EXPECT_FALSE(q().Nack(queue, n).ok()) << f;
  }
  for (const Delivery& d : got) {
    auto job = q().Get(queue, JobRef::ById(d.id));
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->state, JobState::kReserved) << "a forged receipt changed job " << d.id;
  }
  EXPECT_TRUE(q().Ack(queue, a).ok());
  EXPECT_TRUE(q().Ack(queue, b).ok());
}

// A forged receipt is refused before the job is looked up, with one answer whether or not its
// id names a job, so forging receipts cannot probe which jobs exist. A receipt is good only on
// the queue it was issued for. A genuine receipt keeps its precise answers (404 once the job is
// gone, 409 once it was delivered again).
TEST_P(QueueConformance, AForgedReceiptTellsNothingAboutWhichJobsExist) {
  const std::string queue = QueueName(), other = QueueName() + "-other";
  EnqueueResult live = MustEnqueue(q(), queue, Job("live"));
  MustEnqueue(q(), other, Job("elsewhere"));
  const std::string token_and_tag = "." + std::string(32, 'a') + "." + std::string(16, 'b');
  const std::string missing_id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
  auto answer = [&](const std::string& receipt) {
    Status s = q().Ack(queue, receipt);
    std::string message = s.message();
    for (size_t at; (at = message.find(receipt)) != std::string::npos;) message.erase(at, receipt.size());
    return std::make_pair(s.code(), message);
  };
  const auto for_live = answer(live.id + token_and_tag);
  const auto for_missing = answer(missing_id + token_and_tag);
  EXPECT_EQ(for_live.first, Code::kInvalidArgument);
  EXPECT_EQ(for_live, for_missing) << "the answers differ by whether the job exists";
  EXPECT_EQ(for_live.second.find(live.id), std::string::npos) << for_live.second;
  MustReserve(q(), queue);  // held now: still the same answer
  EXPECT_EQ(answer(live.id + token_and_tag), for_missing);

  auto d = MustReserve(q(), other);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(q().Ack(queue, d[0].receipt).code(), Code::kInvalidArgument) << "a receipt of another queue";
  NackRequest n;
  n.receipt = d[0].receipt;
  EXPECT_EQ(q().Nack(queue, n).code(), Code::kInvalidArgument);
  EXPECT_EQ(q().Touch(queue, d[0].receipt, std::nullopt).code(), Code::kInvalidArgument);
  auto job = q().Get(other, JobRef::ById(d[0].id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReserved);
  EXPECT_TRUE(q().Ack(other, d[0].receipt).ok());
  EXPECT_EQ(q().Ack(other, d[0].receipt).code(), Code::kNotFound) << "genuine, and the job is gone";
}

// One answer's bytes are bounded: it stops before the job whose stored record would take it
// over max_bytes, the first job always comes, and the rest stay ready in order. Both stores
// count the same encoded records, so the same request answers the same jobs.
TEST_P(QueueConformance, AReserveAnswerStopsAtMaxBytes) {
  const std::string queue = QueueName();
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    EnqueueRequest r = Job("\"" + std::string(100'000, static_cast<char>('a' + i)) + "\"");
    ids.push_back(MustEnqueue(q(), queue, r).id);
  }
  auto three = MustReserveBytes(q(), queue, 350'000);
  ASSERT_EQ(three.size(), 3u);
  std::set<std::string> seen;  // in due order on one shard; a sharded queue orders per shard
  for (const auto& d : three) seen.insert(d.id);
  auto one = MustReserveBytes(q(), queue, 1);
  ASSERT_EQ(one.size(), 1u) << "the first job comes whatever its size";
  seen.insert(one[0].id);
  // A waiting reserve keeps its bound when jobs arrive.
  const std::string later = QueueName();
  ReserveRequest w;
  w.max = 10;
  w.wait_ms = 60'000;
  w.max_bytes = 150'000;
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto future = promise->get_future();
  q().ReserveAsync(later, w, [promise](Result<std::vector<Delivery>> res) { promise->set_value(std::move(res)); });
  std::vector<EnqueueRequest> batch(3, Job("\"" + std::string(100'000, 'z') + "\""));
  auto enqueued = q().EnqueueBatch(later, batch);
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  auto waited = Await(future);
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ(waited->size(), 1u);
  auto rest = MustReserve(q(), queue);
  ASSERT_EQ(rest.size(), 2u);
  for (const auto& d : rest) seen.insert(d.id);
  EXPECT_EQ(seen, std::set<std::string>(ids.begin(), ids.end())) << "a job was answered twice or lost";
  EXPECT_EQ(MustStats(q(), later).ready, 2);
  ReserveRequest zero;
  zero.max_bytes = 0;
  EXPECT_EQ(q().Reserve(queue, zero).code(), Code::kInvalidArgument);
}

// A bound that falls beyond the first records read (the embedded store reads 8, 16, 32, ...):
// the answer still stops at the first job that would go over, and the rest stay ready.
TEST_P(QueueConformance, AReserveOfManyStopsAtMaxBytesPastItsFirstReads) {
  const std::string queue = QueueName();
  std::vector<EnqueueRequest> batch(100, Job("\"" + std::string(1000, 'p') + "\""));
  auto enqueued = q().EnqueueBatch(queue, batch);
  ASSERT_TRUE(enqueued.ok()) << enqueued.status().ToString();
  ReserveRequest r;
  r.max = 100;
  r.max_bytes = 30'000;  // each record holds a 1 002-byte payload and some bytes more
  auto got = q().Reserve(queue, r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_GE(got->size(), 25u);
  EXPECT_LE(got->size(), 29u);
  std::set<std::string> seen;
  for (const auto& d : *got) seen.insert(d.id);
  auto rest = q().Reserve(queue, {100, 0, std::nullopt});
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(got->size() + rest->size(), 100u);
  for (const auto& d : *rest) EXPECT_TRUE(seen.insert(d.id).second) << d.id << " answered twice";
}

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

TEST_P(QueueConformance, DuplicateKeyReturnsTheLiveJob) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("first", 10 * h_->unit_ms());
  r.key = "k1";
  EnqueueResult a = MustEnqueue(q(), queue, r);
  r.payload = "second";
  EnqueueResult b = MustEnqueue(q(), queue, r);
  EXPECT_TRUE(b.duplicate);
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.due_at_ms, a.due_at_ms);
  auto job = q().Get(queue, JobRef::ById(a.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->payload, "first");
  EXPECT_EQ(MustStats(q(), queue).scheduled, 1);

  // Within one batch the first job with a key wins.
  EnqueueRequest x = Job("x");
  x.key = "k2";
  EnqueueRequest y = Job("y");
  y.key = "k2";
  auto res = q().EnqueueBatch(queue, std::vector<EnqueueRequest>{x, y});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_FALSE((*res)[0].duplicate);
  EXPECT_TRUE((*res)[1].duplicate);
  EXPECT_EQ((*res)[0].id, (*res)[1].id);

  // Once acked, the key is free again.
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].key, "k2");
  ASSERT_TRUE(q().Ack(queue, got[0].receipt).ok());
  EnqueueResult c = MustEnqueue(q(), queue, x);
  EXPECT_FALSE(c.duplicate);
  EXPECT_NE(c.id, (*res)[0].id);
}

TEST_P(QueueConformance, ReplaceByKeyRewritesPayloadHeadersAndDueTime) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("v1", 100 * h_->unit_ms());
  r.key = "order-7";
  r.headers = {{"v", "1"}};
  EnqueueResult a = MustEnqueue(q(), queue, r);
  r.payload = "v2";
  r.headers = {{"v", "2"}};
  r.when.delay_ms = 0;
  r.replace = true;
  EnqueueResult b = MustEnqueue(q(), queue, r);
  EXPECT_EQ(b.id, a.id);
  EXPECT_TRUE(b.duplicate);
  EXPECT_TRUE(b.replaced);
  EXPECT_LT(b.due_at_ms, a.due_at_ms);
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "v2");
  EXPECT_EQ(got[0].headers.at("v"), "2");
  // While reserved it cannot be replaced.
  r.payload = "v3";
  EXPECT_EQ(q().Enqueue(queue, r).code(), Code::kConflict);
  auto job = q().Get(queue, JobRef::ById(a.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->payload, "v2");
  // Replaced after a failed attempt, with fewer attempts allowed: its attempts start again, so
  // it is never delivered for "attempt 2 of 1". (Found by delayq-check.)
  ASSERT_TRUE(q().Nack(queue, {got[0].receipt, 0, "failed", false}).ok());
  r.payload = "v4";
  r.max_attempts = 1;
  EXPECT_TRUE(MustEnqueue(q(), queue, r).replaced);
  job = q().Get(queue, JobRef::ById(a.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->attempt, 0);
  EXPECT_EQ(job->max_attempts, 1);
  got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "v4");
  EXPECT_EQ(got[0].attempt, 1);
  EXPECT_EQ(got[0].max_attempts, 1);
  auto nack = q().Nack(queue, {got[0].receipt, 0, "failed again", false});
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(nack->state, JobState::kDead) << "its one attempt is used";
}

TEST_P(QueueConformance, CancelByIdAndByKey) {
  const std::string queue = QueueName();
  EnqueueResult a = MustEnqueue(q(), queue, Job("a", 10 * h_->unit_ms()));
  EnqueueRequest kr = Job("b", 10 * h_->unit_ms());
  kr.key = "cancel-me";
  EnqueueResult b = MustEnqueue(q(), queue, kr);
  EnqueueResult c = MustEnqueue(q(), queue, Job("c"));  // ready
  EnqueueResult d = MustEnqueue(q(), queue, Job("d"));

  EXPECT_TRUE(q().Cancel(queue, JobRef::ById(a.id)).ok());
  EXPECT_EQ(q().Get(queue, JobRef::ById(a.id)).code(), Code::kNotFound);
  EXPECT_EQ(q().Cancel(queue, JobRef::ById(a.id)).code(), Code::kNotFound);
  EXPECT_TRUE(q().Cancel(queue, JobRef::ByKey("cancel-me")).ok());
  EXPECT_EQ(q().Get(queue, JobRef::ById(b.id)).code(), Code::kNotFound);
  EXPECT_TRUE(q().Cancel(queue, JobRef::ById(c.id)).ok());

  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, d.id);
  EXPECT_EQ(q().Cancel(queue, JobRef::ById(d.id)).code(), Code::kConflict);
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.scheduled, 0);
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(s.reserved, 1);
  // The key is free again after the cancel.
  EXPECT_FALSE(MustEnqueue(q(), queue, kr).duplicate);
  h_->Advance(11 * h_->unit_ms());
  EXPECT_EQ(ReserveEventually(*h_, queue).size(), 1u);
}

TEST_P(QueueConformance, RescheduleMovesTheDueTime) {
  const std::string queue = QueueName();
  const int64_t u = h_->unit_ms();
  EnqueueResult a = MustEnqueue(q(), queue, Job("a", 100 * u));
  EnqueueRequest kr = Job("b", 2 * u);
  kr.key = "b";
  EnqueueResult b = MustEnqueue(q(), queue, kr);

  When sooner;
  sooner.delay_ms = u;
  auto moved = q().Reschedule(queue, JobRef::ById(a.id), sooner);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_LT(moved->due_at_ms, a.due_at_ms);
  When later;
  later.delay_ms = 200 * u;
  ASSERT_TRUE(q().Reschedule(queue, JobRef::ByKey("b"), later).ok());

  auto got = ReceiveAll(*h_, queue, 1, u / 2, 20);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, a.id);
  EXPECT_GE(h_->NowMs(), moved->due_at_ms);
  h_->Advance(5 * u);
  EXPECT_TRUE(MustReserve(q(), queue).empty()) << "b was rescheduled later";
  EXPECT_EQ(q().Reschedule(queue, JobRef::ById(a.id), sooner).code(), Code::kConflict);
  auto job = q().Get(queue, JobRef::ById(b.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kScheduled);
  When too_far;
  too_far.delay_ms = 400LL * 86'400'000;
  EXPECT_EQ(q().Reschedule(queue, JobRef::ById(b.id), too_far).code(), Code::kInvalidArgument);
}

TEST_P(QueueConformance, NackBacksOffExponentially) {
  const std::string queue = QueueName();
  QueueConfig config;
  config.backoff = {1000, 2.0, 3'600'000, 0.0};
  config.max_attempts = 10;
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  MustEnqueue(q(), queue, Job("retry me"));
  int64_t expected_delay = 1000;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto got = ReceiveAll(*h_, queue, 1, 250, 100);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].attempt, attempt);
    const int64_t before = h_->NowMs();
    auto nack = q().Nack(queue, {got[0].receipt, std::nullopt, "boom", false});
    ASSERT_TRUE(nack.ok()) << nack.status().ToString();
    EXPECT_EQ(nack->state, JobState::kScheduled);
    EXPECT_GE(nack->due_at_ms, before + expected_delay);
    EXPECT_LE(nack->due_at_ms, h_->NowMs() + expected_delay);
    auto job = q().Get(queue, JobRef::ById(got[0].id));
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->last_error, "boom");
    EXPECT_EQ(job->state, JobState::kScheduled);
    if (h_->exact_time()) {
      h_->Advance(expected_delay - 1);
      EXPECT_TRUE(MustReserve(q(), queue).empty()) << "retried before its back-off";
    }
    expected_delay *= 2;
  }
  // An explicit retry delay wins over the back-off.
  auto got = ReceiveAll(*h_, queue, 1, 250, 100);
  ASSERT_EQ(got.size(), 1u);
  auto nack = q().Nack(queue, {got[0].receipt, 0, "", false});
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(ReserveEventually(*h_, queue).size(), 1u);
  EXPECT_EQ(MustStats(q(), queue).counters.nacked, 4u);
}

TEST_P(QueueConformance, LastAttemptGoesDeadAndReplayResetsAttempt) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("fragile");
  r.max_attempts = 2;
  EnqueueResult e = MustEnqueue(q(), queue, r);
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(q().Nack(queue, {got[0].receipt, 0, "first failure", false}).ok());
  got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].attempt, 2);
  auto nack = q().Nack(queue, {got[0].receipt, 0, "second failure", false});
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(nack->state, JobState::kDead);
  EXPECT_TRUE(MustReserve(q(), queue).empty());
  EXPECT_EQ(q().Ack(queue, got[0].receipt).code(), Code::kLeaseExpired);

  auto dead = q().ListDead(queue, 100);
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].id, e.id);
  EXPECT_EQ((*dead)[0].state, JobState::kDead);
  EXPECT_EQ((*dead)[0].attempt, 2);
  EXPECT_EQ((*dead)[0].last_error, "second failure");
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.counters.dead, 1u);

  auto replayed = q().ReplayDead(queue, {});
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_EQ(*replayed, 1);
  auto job = q().Get(queue, JobRef::ById(e.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReady);
  EXPECT_EQ(job->attempt, 0);
  EXPECT_EQ(job->last_error, "second failure") << "replay clears nothing but the dead state";
  EXPECT_EQ(MustStats(q(), queue).dead, 0);
  got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].attempt, 1);
  // Explicitly dead at once, even with attempts left.
  auto now_dead = q().Nack(queue, {got[0].receipt, std::nullopt, "poison", true});
  ASSERT_TRUE(now_dead.ok());
  EXPECT_EQ(now_dead->state, JobState::kDead);
}

TEST_P(QueueConformance, ExpiredLeaseOnTheLastAttemptGoesDead) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("crashy");
  r.max_attempts = 1;
  MustEnqueue(q(), queue, r);
  ASSERT_EQ(MustReserve(q(), queue, 1, 1000).size(), 1u);
  h_->Advance(h_->exact_time() ? 1000 : 1200);
  QueueStats s = StatsWhen(*h_, queue, [](const QueueStats& st) { return st.dead == 1; });
  EXPECT_TRUE(MustReserve(q(), queue).empty());
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.reserved, 0);
  auto dead = q().ListDead(queue, 10);
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_NE((*dead)[0].last_error.find("lease expired"), std::string::npos) << (*dead)[0].last_error;
}

// A dead job is kept for its queue's dead_retention_ms and then deleted, by every store: never
// before, and at that moment (within a scheduling step) — on Redis too, where it was once kept
// forever. Each job runs out on its own clock: a later death is kept longer.
TEST_P(QueueConformance, DeadJobsAreDeletedOnceTheirRetentionRunsOut) {
  const std::string queue = QueueName();
  QueueConfig config;
  config.max_attempts = 1;
  config.dead_retention_ms = std::max<int64_t>(1'000, 4 * h_->unit_ms());
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  auto kill = [&](const std::string& payload) -> delayq::Job {
    MustEnqueue(q(), queue, Job(payload));
    auto got = MustReserve(q(), queue, 1);
    if (got.size() != 1) return {};
    auto r = q().Nack(queue, {.receipt = got[0].receipt, .error = "boom"});
    EXPECT_TRUE(r.ok() && r->state == JobState::kDead);
    auto job = q().Get(queue, JobRef::ById(got[0].id));
    EXPECT_TRUE(job.ok() && job->state == JobState::kDead);
    return job.ok() ? *job : delayq::Job{};
  };
  const delayq::Job first = kill("1");
  h_->Advance(config.dead_retention_ms / 2);
  const delayq::Job second = kill("2");
  ASSERT_GT(first.dead_at_ms, 0);
  ASSERT_GT(second.dead_at_ms, first.dead_at_ms);

  // Lets time pass up to `not_before`, where `job` must still be there, then in small steps
  // until it is gone: never earlier, and soon after.
  auto expect_deleted_at = [&](const delayq::Job& job, int64_t not_before) {
    const int64_t step = h_->exact_time() ? 1 : 20;
    if (h_->NowMs() < not_before - step) h_->Advance(not_before - step - h_->NowMs());
    auto there = q().Get(queue, JobRef::ById(job.id));
    if (h_->NowMs() < not_before) {
      EXPECT_TRUE(there.ok()) << "deleted before its retention ran out";
    }
    for (int64_t waited = 0; waited <= 3'000; waited += step) {
      h_->Advance(step);
      auto j = q().Get(queue, JobRef::ById(job.id));
      const int64_t after = h_->NowMs();
      if (!j.ok()) {
        EXPECT_EQ(j.code(), Code::kNotFound) << j.status().ToString();
        EXPECT_GE(after, not_before) << "deleted before its retention ran out";
        return;
      }
    }
    ADD_FAILURE() << "dead job " << job.id << " still there 3 s after its retention ran out";
  };
  expect_deleted_at(first, first.dead_at_ms + config.dead_retention_ms);
  EXPECT_TRUE(q().Get(queue, JobRef::ById(second.id)).ok()) << "the later death must be kept longer";
  EXPECT_EQ(MustStats(q(), queue).dead, 1);
  expect_deleted_at(second, second.dead_at_ms + config.dead_retention_ms);
  EXPECT_EQ(MustStats(q(), queue).dead, 0);
  auto listed = q().ListDead(queue, 10);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

// A nack that sends a job to dead answers the due time the job had (and keeps it: Get shows the
// same), on every store; Redis answered 0 and then showed the time of death.
TEST_P(QueueConformance, ANackThatKillsAJobAnswersItsDueTime) {
  const std::string queue = QueueName();
  QueueConfig config;
  config.max_attempts = 1;
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  MustEnqueue(q(), queue, Job("x"));
  auto got = MustReserve(q(), queue, 1);
  ASSERT_EQ(got.size(), 1u);
  h_->Advance(h_->unit_ms());
  auto r = q().Nack(queue, {.receipt = got[0].receipt, .error = "boom"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, JobState::kDead);
  EXPECT_EQ(r->due_at_ms, got[0].due_at_ms);
  auto job = q().Get(queue, JobRef::ById(got[0].id));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kDead);
  EXPECT_EQ(job->due_at_ms, got[0].due_at_ms);
  EXPECT_GE(job->dead_at_ms, got[0].due_at_ms + h_->unit_ms());
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
  config.lease_ms = 1'000;
  ASSERT_TRUE(q().SetConfig(queue, config).ok());

  expect_text(q().Get("conf.no-such-queue." + std::to_string(::getpid()), JobRef::ById("x")).status(),
              errors::UnknownQueue("conf.no-such-queue." + std::to_string(::getpid())), "unknown queue");
  expect_text(q().Get(queue, JobRef::ById("nope")).status(), errors::NotAJobId("id", "nope"), "bad id");
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

// Recovery, on every store: after a restart every job is where it was — scheduled, ready,
// reserved (its receipt still good, its lease still running out when it did), dead — with its
// attempts, key and due time; the config and a pause stay; and time goes on from there: the
// scheduled job comes due, the lease runs out and the job is delivered again.
TEST_P(QueueConformance, EveryStateSurvivesARestart) {
  const std::string queue = QueueName(), paused = QueueName();
  const int64_t unit = h_->unit_ms();
  QueueConfig config;
  config.max_attempts = 3;
  config.lease_ms = std::max<int64_t>(1'000, 4 * unit);
  ASSERT_TRUE(q().SetConfig(queue, config).ok());
  // A dead one (its own max_attempts), a reserved one, a ready one, a keyed scheduled one.
  EnqueueRequest doomed = Job("dead");
  doomed.max_attempts = 1;
  MustEnqueue(q(), queue, doomed);
  auto first = MustReserve(q(), queue, 1);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(q().Nack(queue, {.receipt = first[0].receipt, .error = "boom"}).ok());
  MustEnqueue(q(), queue, Job("held"));
  auto held = MustReserve(q(), queue, 1);
  ASSERT_EQ(held.size(), 1u);
  const auto ready = MustEnqueue(q(), queue, Job("ready"));
  EnqueueRequest keyed = Job("later", 10 * unit);
  keyed.key = "later-key";
  const auto later = MustEnqueue(q(), queue, keyed);
  ASSERT_TRUE(q().Pause(paused).ok());
  MustEnqueue(q(), paused, Job("waits"));
  auto snapshot = [&](const std::string& id) {
    auto j = q().Get(queue, JobRef::ById(id));
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? *j : delayq::Job{};
  };
  const delayq::Job before[] = {snapshot(first[0].id), snapshot(held[0].id), snapshot(ready.id), snapshot(later.id)};
  const QueueStats stats = MustStats(q(), queue);

  h_->Restart();

  for (const delayq::Job& b : before) {
    const delayq::Job a = snapshot(b.id);
    EXPECT_EQ(a.state, b.state) << b.payload;
    EXPECT_EQ(a.due_at_ms, b.due_at_ms) << b.payload;
    EXPECT_EQ(a.attempt, b.attempt) << b.payload;
    EXPECT_EQ(a.max_attempts, b.max_attempts) << b.payload;
    EXPECT_EQ(a.key, b.key) << b.payload;
    EXPECT_EQ(a.payload, b.payload);
    EXPECT_EQ(a.last_error, b.last_error) << b.payload;
    EXPECT_EQ(a.lease_deadline_ms, b.lease_deadline_ms) << b.payload;
    EXPECT_EQ(a.dead_at_ms, b.dead_at_ms) << b.payload;
  }
  const QueueStats after = MustStats(q(), queue);
  EXPECT_EQ(after.scheduled, stats.scheduled);
  EXPECT_EQ(after.ready, stats.ready);
  EXPECT_EQ(after.reserved, stats.reserved);
  EXPECT_EQ(after.dead, stats.dead);
  auto config_after = q().GetConfig(queue);
  ASSERT_TRUE(config_after.ok());
  EXPECT_EQ(*config_after, config);
  EXPECT_TRUE(MustStats(q(), paused).paused);
  EXPECT_TRUE(MustReserve(q(), paused).empty()) << "a paused queue stays paused";
  auto dup = q().Enqueue(queue, keyed);
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->duplicate) << "the key still names its job";
  EXPECT_EQ(dup->id, later.id);

  // The reserved job's receipt still touches; once its lease runs out the job is delivered again.
  ASSERT_TRUE(q().Touch(queue, held[0].receipt, config.lease_ms).ok()) << "a receipt survives the restart";
  auto ready_now = MustReserve(q(), queue, 10);
  ASSERT_EQ(ready_now.size(), 1u);
  EXPECT_EQ(ready_now[0].id, ready.id);
  ASSERT_TRUE(q().Ack(queue, ready_now[0].receipt).ok());
  h_->Advance(config.lease_ms + unit);
  auto again = ReceiveAll(*h_, queue, 1, unit / 4 + 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, held[0].id);
  EXPECT_EQ(again[0].attempt, 2);
  EXPECT_EQ(q().Ack(queue, held[0].receipt).code(), Code::kLeaseExpired);
  ASSERT_TRUE(q().Ack(queue, again[0].receipt).ok());
  // The scheduled job comes due when it said; the dead one replays.
  auto due = ReceiveAll(*h_, queue, 1, unit);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].id, later.id);
  EXPECT_GE(h_->NowMs(), later.due_at_ms);
  const std::vector<std::string> dead_ids = {first[0].id};
  EXPECT_EQ(*q().ReplayDead(queue, dead_ids), 1);
}

TEST_P(QueueConformance, ReplaySelectedIdsAndPurge) {
  const std::string queue = QueueName();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    EnqueueRequest r = Job("d" + std::to_string(i));
    r.max_attempts = 1;
    ids.push_back(MustEnqueue(q(), queue, r).id);
  }
  for (auto& d : MustReserve(q(), queue)) {
    ASSERT_TRUE(q().Nack(queue, {d.receipt, 0, "x", false}).ok());
  }
  ASSERT_EQ(MustStats(q(), queue).dead, 5);
  std::vector<std::string> pick = {ids[1], ids[3], "01JDQ8Z3K6T6V3W1C9X2N4M5PQ"};
  auto replayed = q().ReplayDead(queue, pick);
  ASSERT_TRUE(replayed.ok());
  EXPECT_EQ(*replayed, 2);
  EXPECT_EQ(q().ReplayDead(queue, std::vector<std::string>{"bad id"}).code(), Code::kInvalidArgument);
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 2u);
  std::set<std::string> got_ids = {got[0].id, got[1].id};
  EXPECT_EQ(got_ids, (std::set<std::string>{ids[1], ids[3]}));
  auto purged = q().PurgeDead(queue);
  ASSERT_TRUE(purged.ok());
  EXPECT_EQ(*purged, 3);
  EXPECT_EQ(MustStats(q(), queue).dead, 0);
  EXPECT_EQ(q().Get(queue, JobRef::ById(ids[0])).code(), Code::kNotFound);
  auto dead = q().ListDead(queue, 10);
  ASSERT_TRUE(dead.ok());
  EXPECT_TRUE(dead->empty());
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A request naming one job or delivery several times (in one spelling or several: ids are
// case-insensitive) acts on it once and counts it once; no count ever goes below zero.
TEST_P(QueueConformance, ARepeatedIdOrReceiptCountsOnce) {
  const std::string queue = QueueName();
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    EnqueueRequest r = Job("d" + std::to_string(i));
    r.max_attempts = 1;
    ids.push_back(MustEnqueue(q(), queue, r).id);
  }
  for (auto& d : MustReserve(q(), queue)) {
    ASSERT_TRUE(q().Nack(queue, {d.receipt, 0, "x", false}).ok());
  }
  ASSERT_EQ(MustStats(q(), queue).dead, 2);
  std::vector<std::string> thrice = {ids[0], ids[0], Lower(ids[0])};
  auto replayed = q().ReplayDead(queue, thrice);
  ASSERT_TRUE(replayed.ok()) << replayed.status().ToString();
  EXPECT_EQ(*replayed, 1);
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.ready, 1);
  EXPECT_EQ(s.scheduled, 0);

  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  const std::string& r = got[0].receipt;
  std::vector<std::string> receipts = {r, r, Lower(r.substr(0, 26)) + r.substr(26)};
  std::vector<Status> acks = q().AckBatch(queue, receipts);
  ASSERT_EQ(acks.size(), 3u);
  for (const Status& a : acks) EXPECT_TRUE(a.ok()) << a.ToString();
  s = MustStats(q(), queue);
  EXPECT_EQ(s.counters.acked, 1u);
  EXPECT_EQ(s.reserved, 0);
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(s.scheduled, 0);
  EXPECT_EQ(s.dead, 1);
  // Once more: the job is gone, and every copy says so.
  for (const Status& a : q().AckBatch(queue, receipts)) EXPECT_EQ(a.code(), Code::kNotFound);
  EXPECT_EQ(MustStats(q(), queue).counters.acked, 1u);
  // The rest of the dead, replayed twice over, then purged: nothing negative anywhere.
  EXPECT_EQ(*q().ReplayDead(queue, std::vector<std::string>{ids[1], ids[1]}), 1);
  EXPECT_EQ(*q().ReplayDead(queue, std::vector<std::string>{ids[1]}), 0);
  EXPECT_EQ(*q().PurgeDead(queue), 0);
  s = MustStats(q(), queue);
  EXPECT_EQ(s.dead, 0);
  EXPECT_EQ(s.ready, 1);
}

// A dead job releases its key; replayed after another job took the key, it comes back without
// one, so no two live jobs show the same key. (Found by delayq-check.)
TEST_P(QueueConformance, ReplayedJobWhoseKeyWasTakenComesBackWithoutIt) {
  const std::string queue = QueueName();
  EnqueueRequest r = Job("first");
  r.key = "order-7";
  r.max_attempts = 1;
  const std::string first = MustEnqueue(q(), queue, r).id;
  auto got = MustReserve(q(), queue);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(q().Nack(queue, {got[0].receipt, 0, "x", false}).ok());
  r.payload = "second";
  EnqueueResult second = MustEnqueue(q(), queue, r);
  EXPECT_FALSE(second.duplicate) << "a dead job releases its key";
  EXPECT_NE(second.id, first);
  auto replayed = q().ReplayDead(queue, std::vector<std::string>{first});
  ASSERT_TRUE(replayed.ok());
  EXPECT_EQ(*replayed, 1);
  auto job = q().Get(queue, JobRef::ById(first));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReady);
  EXPECT_EQ(job->key, "") << "the key belongs to the live job " << second.id;
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("order-7"))->id, second.id);
  // With the key free, a replay takes it back.
  EnqueueRequest other = Job("other");
  other.key = "order-8";
  other.max_attempts = 1;
  const std::string third = MustEnqueue(q(), queue, other).id;
  for (auto& d : MustReserve(q(), queue)) {
    if (d.id == third) {
      ASSERT_TRUE(q().Nack(queue, {d.receipt, 0, "x", false}).ok());
    }
  }
  ASSERT_EQ(*q().ReplayDead(queue, std::vector<std::string>{third}), 1);
  EXPECT_EQ(q().Get(queue, JobRef::ById(third))->key, "order-8");
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("order-8"))->id, third);
}

TEST_P(QueueConformance, PausedQueueHandsOutNothing) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("a"));
  ASSERT_TRUE(q().Pause(queue).ok());
  EXPECT_TRUE(MustReserve(q(), queue).empty());
  MustEnqueue(q(), queue, Job("b", h_->unit_ms()));
  h_->Advance(2 * h_->unit_ms());
  QueueStats s = StatsWhen(*h_, queue, [](const QueueStats& st) { return st.ready == 2; });
  EXPECT_TRUE(s.paused);
  EXPECT_EQ(s.ready, 2) << "jobs still come due while paused";
  auto waiting = ReserveWaiting(q(), queue, 60'000, 10);
  ASSERT_TRUE(q().Resume(queue).ok());
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok());
  if (!h_->ordered() && got->size() == 1) {  // shards resume one by one: the rest follows
    auto rest = MustReserve(q(), queue);
    got->insert(got->end(), rest.begin(), rest.end());
  }
  EXPECT_EQ(got->size(), 2u);
  EXPECT_FALSE(MustStats(q(), queue).paused);
}

TEST_P(QueueConformance, TouchExtendsTheLease) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("long work"));
  // A real clock's lease leaves room for slow calls (a sanitizer build, a loaded machine): the
  // touch must come while the first lease holds.
  const int64_t first_lease = h_->exact_time() ? 1000 : 3000;
  auto got = MustReserve(q(), queue, 1, first_lease);
  ASSERT_EQ(got.size(), 1u);
  h_->Advance(first_lease / 2);
  auto touched = q().Touch(queue, got[0].receipt, 5000);
  ASSERT_TRUE(touched.ok()) << touched.status().ToString();
  EXPECT_GE(touched->lease_deadline_ms, h_->NowMs() + 4000);
  h_->Advance(first_lease / 2 + 1000);  // past the first lease, well within the touched one
  EXPECT_TRUE(MustReserve(q(), queue).empty()) << "the touched lease expired early";
  EXPECT_EQ(q().Touch(queue, got[0].receipt, 10).code(), Code::kInvalidArgument);
  EXPECT_TRUE(q().Ack(queue, got[0].receipt).ok());
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

TEST_P(QueueConformance, WaitingReserveIsAnsweredWhenAJobArrivesOrComesDue) {
  const std::string queue = QueueName();
  auto waiting = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult e = MustEnqueue(q(), queue, Job("wake up"));
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, e.id);

  waiting = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult later = MustEnqueue(q(), queue, Job("due soon", 2 * h_->unit_ms()));
  h_->Advance(2 * h_->unit_ms());
  got = Await(waiting);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, later.id);
  EXPECT_GE(h_->NowMs(), later.due_at_ms);
}

// The long-poll paths besides "a job arrives": a client that hangs up, a pause and a resume, a
// config change. Each waiting reserve is answered exactly once, and no job is handed to a
// waiter that is gone.
TEST_P(QueueConformance, EveryWaitingReserveIsAnsweredOnceThroughHangUpPauseAndConfigChanges) {
  const std::string queue = QueueName();
  // A client hangs up: its waiter answers empty at once, and a job enqueued afterwards goes to
  // the next waiter, not to the one that left.
  auto promise = std::make_shared<std::promise<Result<std::vector<Delivery>>>>();
  auto gone = promise->get_future();
  std::atomic<int> calls{0};
  ReserveRequest r;
  r.wait_ms = 60'000;
  const uint64_t handle = q().ReserveAsync(queue, r, [promise, &calls](Result<std::vector<Delivery>> res) {
    if (calls.fetch_add(1) == 0) promise->set_value(std::move(res));
  });
  q().CancelReserve(handle);
  auto left = Await(gone);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
  auto next = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult first = MustEnqueue(q(), queue, Job("for the next waiter"));
  auto got = Await(next);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, first.id);
  q().CancelReserve(handle);  // a second hang-up of an answered waiter changes nothing
  EXPECT_EQ(calls.load(), 1);

  // A paused queue hands nothing to a waiter; the resume does.
  ASSERT_TRUE(q().Pause(queue).ok());
  auto paused = ReserveWaiting(q(), queue, 60'000);
  EnqueueResult second = MustEnqueue(q(), queue, Job("after the resume"));
  auto job = q().Get(queue, JobRef::ById(second.id));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReady);
  ASSERT_TRUE(q().Resume(queue).ok());
  got = Await(paused);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, second.id);

  // A config change while a reserve waits: the waiter is still served, with the queue's lease as
  // read during its wait (the old or the new one: the Redis store reads the config before it
  // runs the reserve script, and a pass that began before the change may take the job).
  auto waiting = ReserveWaiting(q(), queue, 60'000);
  auto config = q().GetConfig(queue);
  ASSERT_TRUE(config.ok());
  const int64_t old_lease_ms = config->lease_ms;
  config->lease_ms = 7'000;
  ASSERT_TRUE(q().SetConfig(queue, *config).ok());
  EnqueueResult third = MustEnqueue(q(), queue, Job("after the config change"));
  got = Await(waiting);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].id, third.id);
  const int64_t lease_left = (*got)[0].lease_deadline_ms - h_->NowMs();
  const bool new_lease = lease_left > 7'000 - 2'000 && lease_left < 7'000 + 2'000;
  const bool old_lease = lease_left > old_lease_ms - 2'000 && lease_left < old_lease_ms + 2'000;
  EXPECT_TRUE(new_lease || old_lease) << "a lease of " << lease_left << " ms is neither the old nor the new one";
  // A reserve that starts after the change gets the new lease.
  EnqueueResult fourth = MustEnqueue(q(), queue, Job("later"));
  auto d = MustReserve(q(), queue);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, fourth.id);
  EXPECT_NEAR(static_cast<double>(d[0].lease_deadline_ms - h_->NowMs()), 7'000.0, 2'000.0);
}

TEST_P(QueueConformance, WaitingReserveTimesOutEmpty) {
  const std::string queue = QueueName();
  auto waiting = ReserveWaiting(q(), queue, 2 * h_->unit_ms());
  h_->Advance(2 * h_->unit_ms() + (h_->exact_time() ? 0 : 200));
  auto got = Await(waiting);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

TEST_P(QueueConformance, ManyThreadsNeverLoseOrShareAJob) {
  const std::string queue = QueueName();
  constexpr int kProducers = 4, kPerProducer = 250, kConsumers = 4;
  constexpr int kTotal = kProducers * kPerProducer;
  std::mutex mu;
  std::set<std::string> enqueued, held, acked;
  std::atomic<int> violations{0};
  std::atomic<bool> producers_done{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        auto e = q().Enqueue(queue, Job("p" + std::to_string(p) + "-" + std::to_string(i)));
        if (!e.ok()) {
          ++violations;
          continue;
        }
        std::lock_guard lock(mu);
        enqueued.insert(e->id);
      }
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      while (true) {
        {
          std::lock_guard lock(mu);
          if (producers_done && acked.size() == enqueued.size()) return;
        }
        auto got = q().Reserve(queue, ReserveRequest{8, 0, std::nullopt});
        if (!got.ok()) {
          ++violations;
          return;
        }
        if (got->empty()) std::this_thread::yield();
        for (auto& d : *got) {
          {
            std::lock_guard lock(mu);
            if (!held.insert(d.id).second) ++violations;  // someone else holds it too
          }
          if (!q().Ack(queue, d.receipt).ok()) ++violations;
          std::lock_guard lock(mu);
          held.erase(d.id);
          if (!acked.insert(d.id).second) ++violations;
        }
      }
    });
  }
  for (int p = 0; p < kProducers; ++p) threads[p].join();
  producers_done = true;
  for (size_t i = kProducers; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(enqueued.size(), static_cast<size_t>(kTotal));
  EXPECT_EQ(acked, enqueued);
}

}  // namespace

void ExpectTheQueueLimitHolds(Queue& q) {
  ASSERT_TRUE(q.Enqueue("limit-a", Job("a")).ok());
  ASSERT_TRUE(q.Pause("limit-b").ok());
  ASSERT_TRUE(q.SetConfig("limit-c", QueueConfig{}).ok());
  auto refused = [](const Status& s, const char* what) {
    EXPECT_EQ(s.code(), Code::kResourceExhausted) << what << ": " << s.ToString();
    EXPECT_NE(s.message().find("max-queues"), std::string::npos) << s.message();
  };
  refused(q.Enqueue("limit-d", Job("d")).status(), "enqueue");
  std::vector<EnqueueRequest> batch(2, Job("d"));
  refused(q.EnqueueBatch("limit-d", batch).status(), "batch");
  refused(q.Pause("limit-d"), "pause");
  refused(q.Resume("limit-d"), "resume");
  refused(q.SetConfig("limit-d", QueueConfig{}), "config");
  EXPECT_EQ(q.Stats("limit-d").code(), Code::kNotFound) << "a refused call created the queue";
  auto reserved = q.Reserve("limit-d", {});
  ASSERT_TRUE(reserved.ok()) << "a reserve on a name that is not a queue is empty, not an error";
  EXPECT_TRUE(reserved->empty());
  auto all = q.ListQueues();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
  // The queues there are still work.
  EXPECT_TRUE(q.Enqueue("limit-b", Job("b")).ok());
  EXPECT_TRUE(q.Resume("limit-b").ok());
  EXPECT_TRUE(q.Enqueue("limit-c", Job("c")).ok());
}

}  // namespace delayq::testing
