// Occurrences of a schedule: cron in a time zone across DST (a skipped hour and a repeated hour,
// in Europe/Berlin and America/New_York), every, start_at/end_at, the latest missed ones, and
// the specs refused.
#include "schedule/occurrences.h"

#include <gtest/gtest.h>

#include <chrono>

namespace delayq {
namespace {

// Epoch ms of a UTC date and time.
int64_t Utc(int y, unsigned m, unsigned d, int h, int mi = 0) {
  using namespace std::chrono;
  const sys_days date{year{y} / month{m} / day{d}};
  return (date.time_since_epoch().count() * 86'400LL + h * 3600LL + mi * 60LL) * 1000;
}

Occurrences Compiled(ScheduleSpec spec) {
  if (spec.name.empty()) spec.name = "s";
  auto o = Occurrences::Compile(spec);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return std::move(*o);
}

ScheduleSpec Cron(std::string expr, std::string zone) {
  ScheduleSpec s;
  s.cron = std::move(expr);
  s.timezone = std::move(zone);
  return s;
}

TEST(Occurrences, BerlinSpringForwardFiresTheSkippedTimeWhenTheClockJumps) {
  // 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC); 02:30 does not exist that day.
  auto o = Compiled(Cron("30 2 * * *", "Europe/Berlin"));
  EXPECT_EQ(o.Next(Utc(2026, 3, 28, 12), 3),
            (std::vector<int64_t>{Utc(2026, 3, 29, 1), Utc(2026, 3, 30, 0, 30), Utc(2026, 3, 31, 0, 30)}));
  // A schedule of every 15 minutes: the skipped hour fires once, at the jump, with 03:00.
  auto quarter = Compiled(Cron("*/15 * * * *", "Europe/Berlin"));
  EXPECT_EQ(quarter.Next(Utc(2026, 3, 29, 0, 40), 3),
            (std::vector<int64_t>{Utc(2026, 3, 29, 0, 45), Utc(2026, 3, 29, 1), Utc(2026, 3, 29, 1, 15)}));
}

TEST(Occurrences, BerlinFallBackFiresTheRepeatedTimeOnce) {
  // 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30 happens at 00:30 and 01:30 UTC.
  auto o = Compiled(Cron("30 2 * * *", "Europe/Berlin"));
  EXPECT_EQ(o.Next(Utc(2026, 10, 24, 12), 2),
            (std::vector<int64_t>{Utc(2026, 10, 25, 0, 30), Utc(2026, 10, 26, 1, 30)}));
  // Every 30 minutes: the repeated hour is not run a second time.
  auto half = Compiled(Cron("*/30 * * * *", "Europe/Berlin"));
  EXPECT_EQ(half.Next(Utc(2026, 10, 24, 23, 50), 3),
            (std::vector<int64_t>{Utc(2026, 10, 25, 0), Utc(2026, 10, 25, 0, 30), Utc(2026, 10, 25, 2)}));
}

TEST(Occurrences, NewYorkAcrossBothTransitions) {
  // 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC).
  auto two = Compiled(Cron("0 2 * * *", "America/New_York"));
  EXPECT_EQ(two.Next(Utc(2026, 3, 7, 12), 3),
            (std::vector<int64_t>{Utc(2026, 3, 8, 7), Utc(2026, 3, 9, 6), Utc(2026, 3, 10, 6)}));
  // 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00 UTC); 01:30 happens at 05:30 and 06:30 UTC.
  auto half_past_one = Compiled(Cron("30 1 * * *", "America/New_York"));
  EXPECT_EQ(half_past_one.Next(Utc(2026, 10, 31, 12), 2),
            (std::vector<int64_t>{Utc(2026, 11, 1, 5, 30), Utc(2026, 11, 2, 6, 30)}));
  // The same local time in UTC is the same instant every day of the year.
  auto noon_utc = Compiled(Cron("0 12 * * *", "UTC"));
  EXPECT_EQ(noon_utc.NextAfter(Utc(2026, 3, 8, 11, 59)), Utc(2026, 3, 8, 12));
}

TEST(Occurrences, EveryIsAPeriodFromTheEpochOrFromStartAt) {
  ScheduleSpec s;
  s.every_ms = 90'000;
  auto o = Compiled(s);
  EXPECT_EQ(o.NextAfter(0), 90'000);
  EXPECT_EQ(o.NextAfter(90'000), 180'000) << "strictly after";
  EXPECT_EQ(o.NextAfter(179'999), 180'000);
  s.start_at_ms = 1'000;
  s.end_at_ms = 200'000;
  auto bounded = Compiled(s);
  EXPECT_EQ(bounded.Next(0, 5), (std::vector<int64_t>{1'000, 91'000, 181'000})) << "from start_at, to end_at";
  EXPECT_EQ(bounded.NextAfter(181'000), std::nullopt);
}

TEST(Occurrences, BetweenGivesTheFirstOrTheLatestOfASpan) {
  ScheduleSpec s;
  s.every_ms = 1'000;
  auto o = Compiled(s);
  EXPECT_EQ(o.Between(0, 5'000, 3, false), (std::vector<int64_t>{1'000, 2'000, 3'000}));
  EXPECT_EQ(o.Between(0, 5'000, 2, true), (std::vector<int64_t>{4'000, 5'000}));
  // Days of seconds missed: the latest 100, found without walking them all.
  const int64_t day = 86'400'000;
  auto latest = o.Between(0, 10 * day, 100, true);
  ASSERT_EQ(latest.size(), 100u);
  EXPECT_EQ(latest.front(), 10 * day - 99'000);
  EXPECT_EQ(latest.back(), 10 * day);
  auto monthly = Compiled(Cron("0 0 1 * *", "UTC"));
  EXPECT_EQ(monthly.Between(Utc(2020, 1, 1, 0), Utc(2026, 12, 2, 0), 1, true),
            (std::vector<int64_t>{Utc(2026, 12, 1, 0)}));
  EXPECT_TRUE(o.Between(5'000, 5'000, 10, false).empty());
}

TEST(Occurrences, BadSpecsAreRefusedNamingTheField) {
  struct Case {
    ScheduleSpec spec;
    std::string mention;
  };
  ScheduleSpec both = Cron("* * * * *", "UTC");
  both.every_ms = 1000;
  ScheduleSpec neither;
  ScheduleSpec tiny;
  tiny.every_ms = 10;
  ScheduleSpec backwards = Cron("* * * * *", "UTC");
  backwards.start_at_ms = 2000;
  backwards.end_at_ms = 1000;
  ScheduleSpec bad_name = Cron("* * * * *", "UTC");
  bad_name.name = "has space";
  const Case cases[] = {
      {both, "exactly one of cron"},
      {neither, "neither"},
      {tiny, "every is 10 ms"},
      {Cron("* * * * *", "Mars/Olympus_Mons"), "timezone \"Mars/Olympus_Mons\""},
      {Cron("0 25 * * *", "UTC"), "field 2 (hour)"},
      {backwards, "end_at (1000) is not after start_at (2000)"},
      {bad_name, "schedule name \"has space\""},
  };
  for (const auto& c : cases) {
    ScheduleSpec spec = c.spec;
    if (spec.name.empty()) spec.name = "s";
    auto o = Occurrences::Compile(spec);
    ASSERT_FALSE(o.ok()) << c.mention;
    EXPECT_EQ(o.code(), Code::kInvalidArgument);
    EXPECT_NE(o.status().message().find(c.mention), std::string::npos) << o.status().message();
  }
}

}  // namespace
}  // namespace delayq
