#include "core/json_value.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace delayq {
namespace {

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(IsJsonValue, TakesOneValueAndRefusesTheRest) {
  for (const char* ok : {"1", " {\"a\": [1, 2, null]} ", "\"text\"", "-0.0", "9223372036854775807", "[]"}) {
    EXPECT_TRUE(IsJsonValue(ok)) << ok;
  }
  for (const char* bad : {"", " ", "1 2", "{", "{\"a\":}", "'x'", "NaN", "[1,]", "\"\xff\""}) {
    EXPECT_FALSE(IsJsonValue(bad)) << bad;
  }
}

TEST(IsJsonValue, RefusesNestingDeeperThanItsBound) {
  EXPECT_TRUE(IsJsonValue(Nested(kMaxJsonDepth)));
  EXPECT_FALSE(IsJsonValue(Nested(kMaxJsonDepth + 1)));
  EXPECT_TRUE(IsJsonValue(Nested(5), 5));
  EXPECT_FALSE(IsJsonValue(Nested(6), 5));
}

// The thread's one parser serves bounds and sizes in any order: a large document, then a small
// one with another depth bound, then the large one again (the buffers over 1 MiB were given back
// in between and are had again).
TEST(ThreadDomParse, ServesLargeAndSmallDocumentsAndDepthBoundsInTurn) {
  std::string big = "[";
  for (int i = 0; i < 400'000; ++i) big += "12345,";
  big += "0]";
  ASSERT_GT(big.size(), size_t{2} << 20);
  for (int round = 0; round < 2; ++round) {
    {
      ThreadDomParse parse(big, kMaxJsonDepth);
      ASSERT_EQ(parse.error(), simdjson::SUCCESS);
      EXPECT_EQ(parse.root().get_array().size(), 400'001U);
    }
    {
      ThreadDomParse small("{\"a\": [[1]]}", 4);
      ASSERT_EQ(small.error(), simdjson::SUCCESS);
      EXPECT_EQ(int64_t(small.root()["a"].at(0).at(0)), 1);
    }
    EXPECT_EQ(ThreadDomParse("[[[[[1]]]]]", 4).error(), simdjson::DEPTH_ERROR);
    EXPECT_EQ(ThreadDomParse("18446744073709551616", 3).error(), simdjson::NUMBER_ERROR)
        << "an integer past " << std::numeric_limits<uint64_t>::max();
  }
}

}  // namespace
}  // namespace delayq
