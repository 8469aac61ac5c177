#include "core/duration.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

TEST(Duration, ParsesUnitsDecimalsAndSums) {
  EXPECT_EQ(*ParseDuration("250ms"), 250);
  EXPECT_EQ(*ParseDuration("1.5s"), 1500);
  EXPECT_EQ(*ParseDuration("90s"), 90'000);
  EXPECT_EQ(*ParseDuration("30m"), 1'800'000);
  EXPECT_EQ(*ParseDuration("1h30m"), 5'400'000);
  EXPECT_EQ(*ParseDuration("7d"), 604'800'000);
  EXPECT_EQ(*ParseDuration("0s"), 0);
  EXPECT_EQ(*ParseDuration(".5s"), 500);
  EXPECT_EQ(*ParseDuration("1d2h3m4s5ms"), 93'784'005);
}

TEST(Duration, RefusesWhatItCannotRead) {
  for (const char* bad :
       {"", "5", "s", "-5s", "5 s", "5x", "1..5s", "5sec", "1e3s", "36501d", "99999999999999999999s", "1.2.3s"}) {
    auto r = ParseDuration(bad);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("1h30m"), std::string::npos);
    }
  }
}

TEST(Duration, FormatsTheShortestExactForm) {
  EXPECT_EQ(FormatDuration(0), "0ms");
  EXPECT_EQ(FormatDuration(250), "250ms");
  EXPECT_EQ(FormatDuration(5'400'000), "1h30m");
  EXPECT_EQ(FormatDuration(86'400'000 + 1), "1d1ms");
  for (int64_t v : {1LL, 999LL, 61'000LL, 93'784'005LL}) EXPECT_EQ(*ParseDuration(FormatDuration(v)), v);
}

TEST(Timestamp, ParsesRfc3339) {
  EXPECT_EQ(*ParseTimestamp("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseTimestamp("2026-12-01T10:00:00Z"), 1'796'119'200'000);
  EXPECT_EQ(*ParseTimestamp("2026-12-01T10:00:00.25Z"), 1'796'119'200'250);
  EXPECT_EQ(*ParseTimestamp("2026-12-01T11:00:00+01:00"), 1'796'119'200'000);
  EXPECT_EQ(*ParseTimestamp("2026-12-01 09:30:00-00:30"), 1'796'119'200'000);
  EXPECT_EQ(*ParseTimestamp("2024-02-29T00:00:00Z"), 1'709'164'800'000);
}

TEST(Timestamp, RefusesBadDates) {
  for (const char* bad : {"", "2026-12-01", "2026-12-01T10:00:00", "2026-13-01T00:00:00Z", "2025-02-29T00:00:00Z",
                          "2026-12-01T24:00:00Z", "2026-12-01T10:00:00Zx", "2026-12-01T10:00:00+1:00", "yesterday"}) {
    EXPECT_EQ(ParseTimestamp(bad).code(), Code::kInvalidArgument) << bad;
  }
}

TEST(Timestamp, FormatRoundTrips) {
  for (int64_t ms : {0LL, 1'796'119'200'250LL, 4'102'444'800'000LL}) {
    EXPECT_EQ(*ParseTimestamp(FormatTimestamp(ms)), ms);
  }
  EXPECT_EQ(FormatTimestamp(1'796'119'200'250), "2026-12-01T10:00:00.250Z");
}

}  // namespace
}  // namespace delayq
