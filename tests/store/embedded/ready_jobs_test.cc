// ReadyJobs (store/embedded/ready_jobs.h) on its own: due order while no ready job has a
// priority or a group, ReadyOrder while one has, and back to due order when the last such job
// leaves, whichever way it leaves.
#include "store/embedded/ready_jobs.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

DueKey Key(int64_t due_ms, uint8_t n) {
  Ulid id;
  id.bytes[15] = n;
  return DueKey{due_ms, id};
}

ReadyInfo Info(int32_t priority = 0, std::string group = {}) {
  ReadyInfo info;
  info.lane = Lane{priority, std::move(group)};
  return info;
}

// Found splitting the reserve into plan and apply: its info was moved out of the entry before the
// entry was erased, so a job with a group and priority 0 looked plain as it left, and its queue
// stayed in ReadyOrder (one record read per job) for good.
TEST(ReadyJobs, ATakenJobWithAGroupEndsTheOrderWhenItLeaves) {
  for (int32_t priority : {0, 5}) {
    ReadyJobs ready;
    ready.emplace(Key(1, 1), Info());
    ready.emplace(Key(2, 2), Info(priority, "tenant"));
    ASSERT_TRUE(ready.ordered());
    auto pick = ready.Peek(10, ReadyOrderRules{});
    ASSERT_TRUE(pick.has_value());
    // Take the grouped job whatever the pick was.
    auto it = ready.find(Key(2, 2));
    if (pick->group == "tenant") {
      it = ready.Take(*pick);
      ReadyInfo info = ready.Extract(it, true);
      EXPECT_EQ(info.lane.group, "tenant");
    } else {
      ReadyInfo info = ready.Extract(it, false);
      EXPECT_EQ(info.lane.group, "tenant");
    }
    EXPECT_FALSE(ready.ordered()) << "priority " << priority << ": the last grouped job left";
    EXPECT_EQ(ready.size(), 1u);
  }
}

TEST(ReadyJobs, PlainJobsKeepDueOrderAndErasingKeepsTheCount) {
  ReadyJobs ready;
  ready.emplace(Key(3, 1), Info());
  ready.emplace(Key(1, 2), Info());
  EXPECT_FALSE(ready.ordered());
  EXPECT_EQ(ready.begin()->first.due_ms, 1);
  ready.emplace(Key(2, 3), Info(0, "g"));
  EXPECT_TRUE(ready.ordered());
  EXPECT_EQ(ready.erase(Key(2, 3)), 1u);
  EXPECT_FALSE(ready.ordered());
  ReadyInfo info = ready.Extract(ready.begin(), false);
  EXPECT_TRUE(info.lane.plain());
  EXPECT_EQ(ready.size(), 1u);
}

}  // namespace
}  // namespace delayq
