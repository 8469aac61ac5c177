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
  gen.Observe(*Ulid::Parse("7ZZZZZZZZZZZZZZZZZZZZZZZZZ") );
  EXPECT_EQ(gen.Next(3000).ToString().size(), 26u);
}

}  // namespace
}  // namespace delayq
