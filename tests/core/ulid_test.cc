#include "core/ulid.h"

#include <gtest/gtest.h>

#include <set>

namespace delayq {
namespace {

TEST(Ulid, TextRoundTripAndTimestamp) {
  UlidGenerator gen;
  Ulid u = gen.Next(1'767'225'600'123);
  EXPECT_EQ(u.TimestampMs(), 1'767'225'600'123);
  std::string s = u.ToString();
  ASSERT_EQ(s.size(), 26u);
  EXPECT_EQ(*Ulid::Parse(s), u);
  std::string lower = s;
  for (char& c : lower) c = static_cast<char>(std::tolower(c));
  EXPECT_EQ(*Ulid::Parse(lower), u);
  EXPECT_FALSE(Ulid::Parse("8ZZZZZZZZZZZZZZZZZZZZZZZZZ"));  // over 128 bits
  EXPECT_FALSE(Ulid::Parse("01JDQ8Z3K6T6V3W1C9X2N4M5P"));   // 25 characters
  EXPECT_FALSE(Ulid::Parse("01JDQ8Z3K6T6V3W1C9X2N4M5PU"));  // U is not Crockford
}

TEST(Ulid, StrictlyIncreasingWithinAMillisecondAndWhenTheClockStepsBack) {
  UlidGenerator gen;
  Ulid prev = gen.Next(1000);
  for (int i = 0; i < 10000; ++i) {
    Ulid next = gen.Next(i % 3 == 0 ? 999 : 1000);
    ASSERT_LT(prev, next);
    ASSERT_LT(prev.ToString(), next.ToString()) << "text order must match byte order";
    prev = next;
  }
  Ulid later = gen.Next(2000);
  EXPECT_LT(prev, later);
  gen.Observe(*Ulid::Parse("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"));
  EXPECT_EQ(gen.Next(3000).ToString().size(), 26u);
}

}  // namespace
}  // namespace delayq

namespace delayq {
namespace {

// Ids within one millisecond grow by a random step, so a client cannot name the next job's id
// from its own (they were sequential: +1).
TEST(Ulid, IdsWithinAMillisecondAreNotSequential) {
  UlidGenerator gen;
  Ulid prev = gen.Next(1000);
  int plus_one = 0;
  for (int i = 0; i < 1000; ++i) {
    Ulid next = gen.Next(1000);
    ASSERT_LT(prev, next);
    Ulid successor = prev;
    for (int b = 15; b >= 6; --b) {
      if (++successor.bytes[b] != 0) break;
    }
    if (successor == next) ++plus_one;
    prev = next;
  }
  EXPECT_LT(plus_one, 3);  // a step of exactly 1 has odds 2^-32 each
}

}  // namespace
}  // namespace delayq
