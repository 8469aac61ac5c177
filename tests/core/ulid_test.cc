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
  // Crockford's aliases read as the digits they look like, in either case.
  EXPECT_EQ(*Ulid::Parse("0000000000000000000000000I"), *Ulid::Parse("00000000000000000000000001"));
  EXPECT_EQ(*Ulid::Parse("0000000000000000000000000l"), *Ulid::Parse("00000000000000000000000001"));
  EXPECT_EQ(*Ulid::Parse("000000000000000000000000Oo"), *Ulid::Parse("00000000000000000000000000"));
  // Every other byte is refused, wherever it is.
  const std::string valid = "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyzIiLlOo";
  for (int c = 0; c < 256; ++c) {
    std::string text = "0000000000000000000000000" + std::string(1, static_cast<char>(c));
    EXPECT_EQ(Ulid::Parse(text).has_value(), valid.find(static_cast<char>(c)) != std::string::npos) << c;
  }
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

// How many of 1000 ids made by `next` are the previous one plus one in bytes [first, last].
template <typename Next>
int SequentialSteps(Next next, int first, int last) {
  Ulid prev = next();
  int plus_one = 0;
  for (int i = 0; i < 1000; ++i) {
    Ulid id = next();
    EXPECT_LT(prev, id);
    Ulid successor = prev;
    for (int b = last; b >= first; --b) {
      if (++successor.bytes[b] != 0) break;
    }
    if (successor == id) ++plus_one;
    prev = id;
  }
  return plus_one;
}

// Ids within one millisecond grow by a random step, so a client cannot name the next job's id
// from its own (they were sequential: +1). A step of exactly 1 has odds 2^-32 each.
TEST(Ulid, IdsWithinAMillisecondAreNotSequential) {
  UlidGenerator gen;
  EXPECT_LT(SequentialSteps([&] { return gen.Next(1000); }, 6, 15), 3);
}

}  // namespace
}  // namespace delayq

namespace delayq {
namespace {

uint32_t TailOf(const Ulid& u) {
  return (uint32_t{u.bytes[12]} << 24) | (uint32_t{u.bytes[13]} << 16) | (uint32_t{u.bytes[14]} << 8) | u.bytes[15];
}

// Tagged ids carry their tag in the last 4 bytes and increase with the untagged ones, within a
// millisecond, when the clock steps back, and when a millisecond's random part runs out.
TEST(Ulid, TaggedIdsCarryTheirTagAndKeepIncreasing) {
  UlidGenerator gen;
  Ulid prev = gen.Next(1000);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t tag = i % 2 ? 0xffffffffu : static_cast<uint32_t>(i);
    Ulid next = i % 5 == 0 ? gen.Next(1000) : gen.NextTagged(i % 3 == 0 ? 999 : 1000, tag);
    ASSERT_LT(prev, next) << i;
    if (i % 5 != 0) {
      ASSERT_EQ(TailOf(next), tag);
      ASSERT_GE(next.TimestampMs(), 1000);
    }
    prev = next;
  }
  // The random part used up: the next id moves on to a later millisecond.
  gen.Observe(*Ulid::Parse("00000000Z8ZZZZZZZZZZZZZZZZ"));
  Ulid full = gen.NextTagged(1, 7);
  EXPECT_GT(full, *Ulid::Parse("00000000Z8ZZZZZZZZZZZZZZZZ"));
  EXPECT_EQ(TailOf(full), 7u);
  // Within a millisecond they are not sequential either (a step of exactly 1 has odds 2^-24).
  EXPECT_LT(SequentialSteps([&] { return gen.NextTagged(5000, 1); }, 6, 11), 3);
}

}  // namespace
}  // namespace delayq
