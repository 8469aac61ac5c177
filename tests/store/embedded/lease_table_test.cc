// LeaseTable and LeaseCounts (store/embedded/lease_table.h, lease_counts.h) on their own, driven
// by a ManualClock: leases end in deadline order, an extension moves the end, and each queue's
// counts (total, per group) follow every way a lease leaves.
#include "store/embedded/lease_table.h"

#include <gtest/gtest.h>

#include "store/embedded/queue_state.h"

namespace delayq {
namespace {

Ulid Id(uint8_t n) {
  Ulid id;
  id.bytes[15] = n;
  return id;
}

Lease LeaseOf(QueueState& q, uint8_t n, int64_t deadline_mono_us, std::string group = {}) {
  Lease lease;
  lease.queue = &q;
  lease.key = DueKey{n, Id(n)};
  lease.deadline_mono_us = deadline_mono_us;
  lease.deadline_ms = deadline_mono_us / 1000;
  lease.lane.group = std::move(group);
  return lease;
}

TEST(LeaseTable, LeasesEndInDeadlineOrderAndAnExtensionMovesTheEnd) {
  ManualClock clock(1'000'000);
  QueueState q("q");
  LeaseTable leases;
  leases.Add(Id(1), LeaseOf(q, 1, clock.MonoUs() + 30'000));
  leases.Add(Id(2), LeaseOf(q, 2, clock.MonoUs() + 10'000));
  EXPECT_EQ(leases.NextDeadline(), clock.MonoUs() + 10'000);
  clock.AdvanceMs(10);
  EXPECT_EQ(leases.EndedBy(clock.MonoUs()), std::vector<Ulid>{Id(2)});
  leases.Extend(Id(2), clock.MonoUs() + 60'000, 4242);
  EXPECT_EQ(leases.at(Id(2)).deadline_ms, 4242);
  EXPECT_TRUE(leases.EndedBy(clock.MonoUs()).empty());
  clock.AdvanceMs(20);
  EXPECT_EQ(leases.EndedBy(clock.MonoUs()), std::vector<Ulid>{Id(1)});
  leases.Extend(Id(1), clock.MonoUs() + 1'000);  // a retry: what clients see is kept
  EXPECT_EQ(leases.at(Id(1)).deadline_ms, 1030);
  leases.Extend(Id(99), 0);  // no such lease: nothing
  EXPECT_EQ(leases.size(), 2u);
}

TEST(LeaseTable, EachQueueCountsItsLeasesPerGroup) {
  QueueState a("a");
  QueueState b("b");
  LeaseTable leases;
  leases.Add(Id(1), LeaseOf(a, 1, 100));
  leases.Add(Id(2), LeaseOf(a, 2, 100, "tenant-1"));
  leases.Add(Id(3), LeaseOf(a, 3, 100, "tenant-1"));
  leases.Add(Id(4), LeaseOf(b, 4, 100, "tenant-2"));
  EXPECT_EQ(a.leases.total(), 3);
  EXPECT_EQ(a.leases.InGroup(""), 1);
  EXPECT_EQ(a.leases.InGroup("tenant-1"), 2);
  EXPECT_EQ(a.leases.InGroup("tenant-2"), 0);
  EXPECT_TRUE(a.leases.any_named());
  EXPECT_EQ(a.leases.keys().size(), 3u);
  leases.Remove(Id(2));
  leases.Remove(Id(2));  // twice: nothing
  leases.Remove(Id(3));
  EXPECT_EQ(a.leases.InGroup("tenant-1"), 0);
  EXPECT_FALSE(a.leases.any_named());
  EXPECT_TRUE(a.leases.named_groups().empty());
  EXPECT_EQ(b.leases.total(), 1);
}

TEST(LeaseTable, AQueueThatIsGoneTakesItsLeasesAndDeadlinesWithIt) {
  QueueState a("a");
  QueueState b("b");
  LeaseTable leases;
  leases.Add(Id(1), LeaseOf(a, 1, 50));
  leases.Add(Id(2), LeaseOf(b, 2, 70));
  leases.DropQueue(&a);
  EXPECT_FALSE(leases.contains(Id(1)));
  EXPECT_EQ(leases.NextDeadline(), 70);
  EXPECT_EQ(leases.EndedBy(INT64_MAX), std::vector<Ulid>{Id(2)});
  leases.clear();
  EXPECT_EQ(leases.NextDeadline(), Clock::kNever);
}

}  // namespace
}  // namespace delayq
