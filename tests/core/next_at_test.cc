// NextAt (core/next_at.h): a note that comes while a read is on its way survives the read's answer.
#include "core/next_at.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

TEST(NextAt, ANoteAfterTheLaunchSurvivesAnOlderAnswer) {
  NextAt n;
  n.Launched();
  EXPECT_TRUE(n.Note(500));  // a lease taken while the read is on its way
  n.Answered(-1);            // the read saw no lease
  EXPECT_EQ(n.at, 500);
  EXPECT_TRUE(n.By(500));
  EXPECT_FALSE(n.By(499));
}

TEST(NextAt, AnAnswerReplacesNotesFromBeforeItsLaunch) {
  NextAt n;
  EXPECT_TRUE(n.Note(100));
  EXPECT_FALSE(n.Note(200));  // later than what is known: nothing to look at sooner
  n.Launched();               // the read sees both (and that the first was acked meanwhile)
  n.Answered(200);
  EXPECT_EQ(n.at, 200);
  n.Launched();
  n.Answered(Clock::kNever);
  EXPECT_EQ(n.at, Clock::kNever);
  EXPECT_FALSE(n.By(INT64_MAX - 1));
}

TEST(NextAt, TheEarliestOfAnswerAndNotesWins) {
  NextAt n;
  n.Launched();
  n.Note(300);
  n.Note(250);
  n.Answered(100);
  EXPECT_EQ(n.at, 100);
  n.Launched();
  n.Note(INT64_MIN);  // extreme values: no overflow, the earliest wins
  n.Answered(INT64_MAX);
  EXPECT_EQ(n.at, INT64_MIN);
}

}  // namespace
}  // namespace delayq
