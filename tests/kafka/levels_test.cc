#include "delayq/kafka/levels.h"

#include <gtest/gtest.h>

#include "kafka/offset_tracker.h"

namespace delayq::kafka {
namespace {

TEST(KafkaLevels, ParsesTheDefaultLevelsAndNamesTopics) {
  auto levels = Levels::Parse(kDefaultLevels);
  ASSERT_TRUE(levels.ok()) << levels.status().ToString();
  EXPECT_EQ(levels->size(), 12u);
  EXPECT_EQ(levels->smallest_ms(), 1000);
  EXPECT_EQ(levels->TopicName(3, 0), "delayq.30s.0");
  EXPECT_EQ(levels->TopicName(11, 0), "delayq.1d.0");
  EXPECT_EQ(levels->DeadTopic(), "delayq.dead");
}

TEST(KafkaLevels, LevelForPicksTheLargestLevelNotAboveTheDelay) {
  auto levels = Levels::Parse("1s,5s,1m");
  ASSERT_TRUE(levels.ok());
  EXPECT_EQ(levels->LevelFor(0), 0u);  // shorter than every level: the smallest
  EXPECT_EQ(levels->LevelFor(999), 0u);
  EXPECT_EQ(levels->LevelFor(1000), 0u);
  EXPECT_EQ(levels->LevelFor(4999), 0u);
  EXPECT_EQ(levels->LevelFor(5000), 1u);
  EXPECT_EQ(levels->LevelFor(59'999), 1u);
  EXPECT_EQ(levels->LevelFor(3'600'000), 2u);
}

TEST(KafkaLevels, WritesLevelsInTheirShortestFormAndMapsTopicsBack) {
  auto levels = Levels::Parse("500ms,60s,90m", "dq", 3);
  ASSERT_TRUE(levels.ok());
  EXPECT_EQ(levels->TopicName(1, 2), "dq.1m.2");
  EXPECT_EQ(levels->TopicName(2, 0), "dq.1h30m.0");
  EXPECT_EQ(levels->AllTopics().size(), 9u);
  EXPECT_EQ(levels->LevelOfTopic("dq.500ms.0"), 0);
  EXPECT_EQ(levels->LevelOfTopic("dq.1m.2"), 1);
  EXPECT_EQ(levels->LevelOfTopic("dq.60s.2"), -1);  // not the topic's name
  EXPECT_EQ(levels->LevelOfTopic("dq.1m.3"), -1);   // beyond topics per level
  EXPECT_EQ(levels->LevelOfTopic("dq.2m.0"), -1);
  EXPECT_EQ(levels->LevelOfTopic("orders"), -1);
}

TEST(KafkaLevels, RejectsBadLevelsWithAMessageNamingTheEntry) {
  auto bad = [](std::string_view text) { return Levels::Parse(text).status().message(); };
  EXPECT_NE(bad("1s,5x").find("\"5x\""), std::string::npos);
  EXPECT_NE(bad("10s,5s").find("levels must increase: 5s follows 10s"), std::string::npos);
  EXPECT_NE(bad("1s,1s").find("must increase"), std::string::npos);
  EXPECT_NE(bad("1s,,5s").find("empty entry"), std::string::npos);
  EXPECT_NE(bad("0s").find("zero"), std::string::npos);
  EXPECT_EQ(Levels::Parse("1s", "bad prefix").code(), Code::kInvalidArgument);
  EXPECT_EQ(Levels::Parse("1s", "dq", 0).code(), Code::kInvalidArgument);
}

TEST(KafkaRouting, ReadsTargetAndDueOrSaysWhatIsWrong) {
  std::string target = "orders", due = "1767225600000";
  auto ok = ParseRouting(&target, &due);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->target, "orders");
  EXPECT_EQ(ok->due_ms, 1767225600000);
  EXPECT_NE(ParseRouting(nullptr, &due).status().message().find("no delayq-target header"), std::string::npos);
  EXPECT_NE(ParseRouting(&target, nullptr).status().message().find("no delayq-due header"), std::string::npos);
  std::string words = "tomorrow", negative = "-5", empty;
  EXPECT_NE(ParseRouting(&target, &words).status().message().find("epoch milliseconds"), std::string::npos);
  EXPECT_FALSE(ParseRouting(&target, &negative).ok());
  EXPECT_FALSE(ParseRouting(&empty, &due).ok());
  std::string spaced = "my topic";
  EXPECT_FALSE(ParseRouting(&spaced, &due).ok());
}

TEST(OffsetTracker, CommitsUpToTheFirstUnfinishedOffset) {
  OffsetTracker t;
  EXPECT_EQ(t.CommitPoint(), -1);
  for (int64_t o : {10, 11, 13, 14}) t.Add(o);  // a gap at 12 (a transaction marker)
  EXPECT_EQ(t.CommitPoint(), 10);
  t.SetDone(11, true);
  t.SetDone(13, true);
  EXPECT_EQ(t.CommitPoint(), 10);  // 10 still waits (a remainder held in memory)
  t.SetDone(10, true);
  EXPECT_EQ(t.CommitPoint(), 14);
  t.SetDone(14, true);
  EXPECT_EQ(t.CommitPoint(), 15);
  t.SetDone(14, false);  // an aborted transaction takes it back
  EXPECT_EQ(t.CommitPoint(), 14);
  t.SetDone(14, true);
  t.Compact();
  EXPECT_EQ(t.pending(), 0u);
  EXPECT_EQ(t.CommitPoint(), 15);
}

}  // namespace
}  // namespace delayq::kafka
