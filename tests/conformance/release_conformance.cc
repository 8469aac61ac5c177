// The conformance suite, giving back deliveries that never reached their consumer
// (Queue::ReleaseBatch) on every store: the jobs are ready again at once, and that delivery counts
// neither as an attempt nor as a delivery; a receipt that is no longer current, or whose lease ran
// out (that attempt counted), is refused. The server uses it for a reserve whose answer could not
// be written (found: such reserves over HTTPS counted their jobs delivered and burned attempts).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

std::vector<std::string> Receipts(const std::vector<Delivery>& d) {
  std::vector<std::string> out;
  for (const auto& x : d) out.push_back(x.receipt);
  return out;
}

}  // namespace

TEST_P(QueueConformance, AReleasedDeliveryIsReadyAgainWithoutUsingAnAttempt) {
  const std::string queue = QueueName();
  EnqueueRequest last = Job("one attempt");
  last.max_attempts = 1;  // released, it still has its one attempt
  MustEnqueue(q(), queue, last);
  EnqueueRequest laned = Job("a tenant's");
  laned.priority = 5;
  laned.group = "tenant";
  MustEnqueue(q(), queue, laned);
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == 2; });
  auto got = MustReserve(q(), queue, 10, 60'000);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& d : got) EXPECT_EQ(d.attempt, 1);
  auto released = q().ReleaseBatch(queue, Receipts(got));
  ASSERT_EQ(released.size(), 2u);
  for (const auto& s : released) EXPECT_TRUE(s.ok()) << s.ToString();
  QueueStats s = StatsWhen(*h_, queue, [](const QueueStats& st) { return st.ready == 2; });
  EXPECT_EQ(s.ready, 2);
  EXPECT_EQ(s.reserved, 0);
  EXPECT_EQ(s.counters.delivered, 0) << "a delivery given back is not counted";
  auto again = MustReserve(q(), queue, 10, 60'000);
  ASSERT_EQ(again.size(), 2u);
  for (const auto& d : again) {
    EXPECT_EQ(d.attempt, 1) << "the released delivery used no attempt";
    EXPECT_NE(d.receipt, got[0].receipt);
  }
  s = MustStats(q(), queue);
  EXPECT_EQ(s.counters.delivered, 2);
  EXPECT_EQ(s.counters.redelivered, 0);
  EXPECT_EQ(s.dead, 0);
  // The receipts of the deliveries given back act on nothing any more.
  for (const auto& old : got) {
    EXPECT_EQ(q().Ack(queue, old.receipt).code(), Code::kLeaseExpired);
  }
  for (const auto& d : again) ASSERT_TRUE(q().Ack(queue, d.receipt).ok());
}

TEST_P(QueueConformance, AReleaseOfAReceiptNoLongerCurrentIsRefusedAndChangesNothing) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("x"));
  auto got = MustReserve(q(), queue, 1, 60'000);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_TRUE(q().ReleaseBatch(queue, std::vector<std::string>{got[0].receipt})[0].ok());
  // Twice: the second finds the delivery over; in one batch, the copy answers as the first.
  auto twice = q().ReleaseBatch(queue, std::vector<std::string>{got[0].receipt});
  EXPECT_EQ(twice[0].code(), Code::kLeaseExpired) << twice[0].ToString();
  auto next = MustReserve(q(), queue, 1, 60'000);
  ASSERT_EQ(next.size(), 1u);
  auto mixed = q().ReleaseBatch(
      queue, std::vector<std::string>{next[0].receipt, "not-a-receipt", next[0].receipt, got[0].receipt});
  ASSERT_EQ(mixed.size(), 4u);
  EXPECT_TRUE(mixed[0].ok()) << mixed[0].ToString();
  EXPECT_EQ(mixed[1].code(), Code::kInvalidArgument);
  EXPECT_TRUE(mixed[2].ok()) << "a repeat answers what the first did";
  EXPECT_EQ(mixed[3].code(), Code::kLeaseExpired);
  auto done = MustReserve(q(), queue, 1, 60'000);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(q().Ack(queue, done[0].receipt).ok());
  EXPECT_EQ(q().ReleaseBatch(queue, std::vector<std::string>{done[0].receipt})[0].code(), Code::kNotFound)
      << "an acked job is gone";
  EXPECT_EQ(q().ReleaseBatch(QueueName(), std::vector<std::string>{done[0].receipt})[0].code(), Code::kNotFound)
      << "no such queue";
  EXPECT_TRUE(q().ReleaseBatch(queue, std::vector<std::string>{}).empty());
}

// A lease that ran out counted its attempt: it cannot be given back afterwards.
TEST_P(QueueConformance, ADeliveryWhoseLeaseRanOutCannotBeGivenBack) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("slow"));
  auto got = MustReserve(q(), queue, 1, 1'000);
  ASSERT_EQ(got.size(), 1u);
  h_->Advance(h_->exact_time() ? 1'001 : 1'500);
  auto late = q().ReleaseBatch(queue, std::vector<std::string>{got[0].receipt});
  EXPECT_EQ(late[0].code(), Code::kLeaseExpired) << late[0].ToString();
}

// Under group_max_reserved, a delivery given back frees its group's room.
TEST_P(QueueConformance, AReleaseFreesItsGroupsRoom) {
  const std::string queue = QueueName();
  QueueConfig c;
  c.group_max_reserved = 1;
  ASSERT_TRUE(q().SetConfig(queue, c).ok());
  for (int i = 0; i < kJobsForEveryShard; ++i) {
    EnqueueRequest j = Job("t");
    j.group = "tenant";
    MustEnqueue(q(), queue, j);
  }
  (void)StatsWhen(*h_, queue, [](const QueueStats& s) { return s.ready == kJobsForEveryShard; });
  auto held = TakeUntilHeldBack(q(), queue);
  ASSERT_FALSE(held.empty());
  for (const auto& s : q().ReleaseBatch(queue, Receipts(held))) ASSERT_TRUE(s.ok()) << s.ToString();
  auto again = TakeUntilHeldBack(q(), queue);
  EXPECT_EQ(again.size(), held.size()) << "the group's room is back";
}

}  // namespace delayq::testing
