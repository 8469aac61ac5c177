// Cron expressions: a table of expressions and the next runs they give, the day-of-month /
// day-of-week rule, names and macros, and every malformed form refused by name.
#include "schedule/cron.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace delayq {
namespace {

// Civil seconds of Y-M-D h:m:s.
CivilSeconds At(int y, unsigned m, unsigned d, int h = 0, int mi = 0, int s = 0) {
  using namespace std::chrono;
  const sys_days date{year{y} / month{m} / day{d}};
  return date.time_since_epoch().count() * 86'400LL + h * 3600LL + mi * 60LL + s;
}

std::string Show(CivilSeconds t) {
  using namespace std::chrono;
  const auto day = floor<days>(sys_seconds{seconds{t}});
  const year_month_day ymd{day};
  const int64_t sod = t - day.time_since_epoch().count() * 86'400LL;
  char out[40];
  std::snprintf(out, sizeof out, "%04d-%02u-%02u %02lld:%02lld:%02lld", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<long long>(sod / 3600), static_cast<long long>(sod / 60 % 60),
                static_cast<long long>(sod % 60));
  return out;
}

// The next `n` runs strictly after `from`.
std::vector<std::string> Runs(const std::string& expr, CivilSeconds from, int n) {
  auto e = CronExpr::Parse(expr);
  EXPECT_TRUE(e.ok()) << expr << ": " << e.status().ToString();
  std::vector<std::string> out;
  if (!e.ok()) return out;
  CivilSeconds t = from + 1;
  for (int i = 0; i < n; ++i) {
    auto next = e->NextAtOrAfter(t);
    if (!next) break;
    out.push_back(Show(*next));
    t = *next + 1;
  }
  return out;
}

TEST(Cron, TheTableOfExpressionsAndTheirNextRuns) {
  // 2026-12-02 is a Wednesday.
  const CivilSeconds from = At(2026, 12, 2, 10, 7, 30);
  struct Case {
    std::string expr;
    std::vector<std::string> want;
  } cases[] = {
      {"* * * * *", {"2026-12-02 10:08:00", "2026-12-02 10:09:00"}},
      {"*/5 * * * *", {"2026-12-02 10:10:00", "2026-12-02 10:15:00"}},
      {"0 * * * *", {"2026-12-02 11:00:00", "2026-12-02 12:00:00"}},
      {"30 2 * * *", {"2026-12-03 02:30:00", "2026-12-04 02:30:00"}},
      {"0 9-17/4 * * *", {"2026-12-02 13:00:00", "2026-12-02 17:00:00", "2026-12-03 09:00:00"}},
      {"15,45 8 * * *", {"2026-12-03 08:15:00", "2026-12-03 08:45:00"}},
      {"0 9 * * MON-FRI", {"2026-12-03 09:00:00", "2026-12-04 09:00:00", "2026-12-07 09:00:00"}},
      {"0 9 * * 1-5", {"2026-12-03 09:00:00", "2026-12-04 09:00:00", "2026-12-07 09:00:00"}},
      {"0 0 * * sun", {"2026-12-06 00:00:00", "2026-12-13 00:00:00"}},
      {"0 0 * * 7", {"2026-12-06 00:00:00"}},  // 7 is Sunday too
      {"0 0 1 * *", {"2027-01-01 00:00:00", "2027-02-01 00:00:00"}},
      {"0 0 1 JAN,jul *", {"2027-01-01 00:00:00", "2027-07-01 00:00:00"}},
      {"0 0 29 2 *", {"2028-02-29 00:00:00", "2032-02-29 00:00:00"}},
      {"0 0 31 * *", {"2026-12-31 00:00:00", "2027-01-31 00:00:00", "2027-03-31 00:00:00"}},
      // Both days restricted: either matches (the 13th, or any Friday).
      {"0 12 13 * FRI", {"2026-12-04 12:00:00", "2026-12-11 12:00:00", "2026-12-13 12:00:00", "2026-12-18 12:00:00"}},
      // Day of month starts with *: both must match (Fridays among the odd days).
      {"0 12 */2 * FRI", {"2026-12-11 12:00:00", "2026-12-25 12:00:00", "2027-01-01 12:00:00"}},
      {"5/20 * * * *", {"2026-12-02 10:25:00", "2026-12-02 10:45:00", "2026-12-02 11:05:00"}},
      // Six fields: seconds first.
      {"*/15 * * * * *", {"2026-12-02 10:07:45", "2026-12-02 10:08:00"}},
      {"0 0 12 * * *", {"2026-12-02 12:00:00", "2026-12-03 12:00:00"}},
      {"@hourly", {"2026-12-02 11:00:00"}},
      {"@daily", {"2026-12-03 00:00:00"}},
      {"@weekly", {"2026-12-06 00:00:00"}},
      {"@monthly", {"2027-01-01 00:00:00"}},
      {"@yearly", {"2027-01-01 00:00:00"}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Runs(c.expr, from, static_cast<int>(c.want.size())), c.want) << c.expr;
  }
}

TEST(Cron, MatchesIsTheSameRuleAsNext) {
  auto e = CronExpr::Parse("0 12 13 * FRI");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->Matches(At(2026, 12, 4, 12)));   // a Friday
  EXPECT_TRUE(e->Matches(At(2026, 12, 13, 12)));  // the 13th
  EXPECT_FALSE(e->Matches(At(2026, 12, 14, 12)));
  EXPECT_FALSE(e->Matches(At(2026, 12, 4, 12, 0, 1))) << "5 fields fire at second 0";
}

TEST(Cron, MalformedExpressionsAreRefusedNamingTheField) {
  struct Case {
    std::string expr, mention;
  } cases[] = {
      {"", "has 0 fields"},
      {"* * * *", "has 4 fields"},
      {"* * * * * * *", "has 7 fields"},
      {"60 * * * *", "field 1 (minute) \"60\" is out of range: minutes are 0-59"},
      {"* 24 * * *", "field 2 (hour) \"24\" is out of range: hours are 0-23"},
      {"* * 0 * *", "field 3 (day of month)"},
      {"* * * 13 *", "field 4 (month)"},
      {"* * * * 8", "field 5 (day of week)"},
      {"* * * FOO *", "names no month"},
      {"* * * * FUNDAY", "names no day of week"},
      {"5-2 * * * *", "runs backwards"},
      {"*/0 * * * *", "bad step"},
      {"*/x * * * *", "bad step"},
      {"1,,2 * * * *", "empty list entry"},
      {"a * * * *", "is not a number"},
      {"-1 * * * *", "empty value"},
      {"0 0 30 2 *", "never matches"},
      {"0 0 31 4,6 *", "never matches"},
      {"@fortnightly", "not a known macro"},
      {"61 * * * * *", "field 1 (second)"},
  };
  for (const auto& c : cases) {
    auto e = CronExpr::Parse(c.expr);
    ASSERT_FALSE(e.ok()) << c.expr;
    EXPECT_EQ(e.code(), Code::kInvalidArgument) << c.expr;
    EXPECT_NE(e.status().message().find(c.mention), std::string::npos) << c.expr << ": " << e.status().message();
  }
}

}  // namespace
}  // namespace delayq
