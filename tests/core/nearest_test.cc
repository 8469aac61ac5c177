#include "core/nearest.h"

#include <gtest/gtest.h>

#include <vector>

namespace delayq {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("delay_ms", "delay_ms"), 0);
  EXPECT_EQ(EditDistance("dealy_ms", "delay_ms"), 1) << "two neighbours swapped is one edit";
  EXPECT_EQ(EditDistance("delay_m", "delay_ms"), 1);
  EXPECT_EQ(EditDistance("delayy_ms", "delay_ms"), 1);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("ca", "abc"), 3) << "optimal string alignment: a swapped pair is not edited again";
}

TEST(Nearest, SuggestsOnlyANameNearEnoughToBeMeant) {
  const std::string_view commands[] = {"enqueue", "reserve", "stats", "work", "dead", "get"};
  EXPECT_EQ(Nearest("reserv", commands), "reserve");
  EXPECT_EQ(Nearest("enqeue", commands), "enqueue");
  EXPECT_EQ(Nearest("stast", commands), "stats");
  EXPECT_EQ(Nearest("wrok", commands), "work");
  EXPECT_EQ(Nearest("bananas", commands), std::nullopt);
  EXPECT_EQ(Nearest("x", commands), std::nullopt) << "one letter is not near anything of four";
  EXPECT_EQ(Nearest("ge", commands), "get");
  EXPECT_EQ(Nearest("", commands), std::nullopt);
  // A unit left off or added.
  EXPECT_EQ(Nearest("wait", {"max", "wait_ms", "lease_ms"}), "wait_ms");
  EXPECT_EQ(Nearest("lease_msec", {"max", "wait_ms", "lease_ms"}), "lease_ms");
  // Ties go to the earlier name.
  EXPECT_EQ(Nearest("bat", {"cat", "bar"}), "cat");
  EXPECT_EQ(DidYouMean("dealy_ms", std::vector<std::string_view>{"delay_ms", "delay"}),
            " (did you mean \"delay_ms\"?)");
  EXPECT_EQ(DidYouMean("qqqqqqq", std::vector<std::string_view>{"delay_ms", "delay"}), "");
}

}  // namespace
}  // namespace delayq
