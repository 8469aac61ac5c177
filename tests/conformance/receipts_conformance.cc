// The Queue conformance suite (queue_conformance.h): receipts: what a receipt acts on, and what a
// wrong one is told; touch.
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

// A request naming one job or delivery several times (in one spelling or several: ids are
// case-insensitive) acts on it once and counts it once; no count ever goes below zero.
// A receipt with its tag tampered with names the genuine one's delivery but is not that receipt:
// beside it in a batch it is refused on its own, and the genuine one acts (a hostile try found the
// genuine one answering the copy's refusal, and the copy hidden behind the genuine one's success).
TEST_P(QueueConformance, ATamperedCopyOfAReceiptInABatchChangesNothingOfTheGenuineOne) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("a"));
  MustEnqueue(q(), queue, Job("b"));
  ReserveRequest two;
  two.max = 2;
  auto got = q().Reserve(queue, two);
  ASSERT_TRUE(got.ok() && got->size() == 2u);
  auto tampered = [](std::string r) {
    r.back() = r.back() == '0' ? '1' : '0';
    return r;
  };
  const std::string a = (*got)[0].receipt, b = (*got)[1].receipt;
  std::vector<Status> acks = q().AckBatch(queue, std::vector<std::string>{tampered(a), a, b, tampered(b)});
  ASSERT_EQ(acks.size(), 4u);
  EXPECT_EQ(acks[0].code(), Code::kInvalidArgument) << acks[0].ToString();
  EXPECT_TRUE(acks[1].ok()) << acks[1].ToString();
  EXPECT_TRUE(acks[2].ok()) << acks[2].ToString();
  EXPECT_EQ(acks[3].code(), Code::kInvalidArgument) << acks[3].ToString();
  QueueStats s = MustStats(q(), queue);
  EXPECT_EQ(s.counters.acked, 2u);
  EXPECT_EQ(s.reserved, 0);
}

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

TEST_P(QueueConformance, TouchExtendsTheLease) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("long work"));
  // A real clock's lease leaves room for slow calls (a sanitizer build, a loaded machine): the
  // touch must come while the first lease holds.
  const int64_t first_lease = h_->exact_time() ? 1000 : 3000;
  auto got = MustReserve(q(), queue, 1, first_lease);
  ASSERT_EQ(got.size(), 1u);
  h_->Advance(first_lease / 2);
  const int64_t touched_at = h_->NowMs();  // before the request: its round trip cannot count
  auto touched = q().Touch(queue, got[0].receipt, 5000);
  ASSERT_TRUE(touched.ok()) << touched.status().ToString();
  EXPECT_GE(touched->lease_deadline_ms, touched_at + 5000 - 5);
  h_->Advance(first_lease / 2 + 1000);  // past the first lease, well within the touched one
  EXPECT_TRUE(MustReserve(q(), queue).empty()) << "the touched lease expired early";
  EXPECT_EQ(q().Touch(queue, got[0].receipt, 10).code(), Code::kInvalidArgument);
  EXPECT_TRUE(q().Ack(queue, got[0].receipt).ok());
}

}  // namespace
}  // namespace delayq::testing
