#include "core/duration.h"

#include <fmt/format.h>

#include <cmath>

namespace delayq {
namespace {

constexpr int64_t kMaxDurationMs = 100LL * 365 * 86'400'000;

int64_t UnitMs(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60'000;
  if (unit == "h") return 3'600'000;
  if (unit == "d") return 86'400'000;
  return 0;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

Status BadDuration(std::string_view text, std::string_view why) {
  return Status::InvalidArgument(
      fmt::format("bad duration \"{}\": {}; expected number+unit parts with units ms, s, m, h, d, such as "
                  "\"250ms\", \"1.5s\", \"1h30m\" or \"7d\"",
                  text.substr(0, 64), why));
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

}  // namespace

Result<int64_t> ParseDuration(std::string_view text) {
  if (text.empty()) return BadDuration(text, "it is empty");
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    size_t int_digits = i - start;
    size_t frac_digits = 0;
    if (i < text.size() && text[i] == '.') {
      ++i;
      size_t frac_start = i;
      while (i < text.size() && IsDigit(text[i])) ++i;
      frac_digits = i - frac_start;
    }
    if (int_digits + frac_digits == 0) {
      return BadDuration(text, fmt::format("expected a number at position {}", start + 1));
    }
    if (int_digits > 12 || frac_digits > 9) return BadDuration(text, "a number is too long");
    size_t unit_start = i;
    while (i < text.size() && !IsDigit(text[i]) && text[i] != '.') ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit.empty()) return BadDuration(text, "a number has no unit");
    int64_t unit_ms = UnitMs(unit);
    if (unit_ms == 0) {
      return BadDuration(text, fmt::format("unknown unit \"{}\"", unit.substr(0, 16)));
    }
    double number = std::strtod(std::string(text.substr(start, unit_start - start)).c_str(), nullptr);
    total += number * static_cast<double>(unit_ms);
    if (total > static_cast<double>(kMaxDurationMs)) {
      return BadDuration(text, "it is longer than 100 years");
    }
  }
  return static_cast<int64_t>(std::llround(total));
}

std::string FormatDuration(int64_t ms) {
  if (ms == 0) return "0ms";
  std::string out;
  if (ms < 0) {
    out = "-";
    ms = -ms;
  }
  struct Unit {
    int64_t ms;
    const char* name;
  };
  for (Unit u : {Unit{86'400'000, "d"}, Unit{3'600'000, "h"}, Unit{60'000, "m"}, Unit{1000, "s"}, Unit{1, "ms"}}) {
    if (ms >= u.ms) {
      out += fmt::format("{}{}", ms / u.ms, u.name);
      ms %= u.ms;
    }
  }
  return out;
}

Result<int64_t> ParseTimestamp(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument(
        fmt::format("bad timestamp \"{}\": {}; expected RFC 3339 such as \"2026-12-01T10:00:00Z\" or "
                    "\"2026-12-01T10:00:00.250+01:00\"",
                    text.substr(0, 64), why));
  };
  auto digits = [&](size_t pos, size_t n, int64_t* out) {
    if (pos + n > text.size()) return false;
    int64_t v = 0;
    for (size_t i = pos; i < pos + n; ++i) {
      if (!IsDigit(text[i])) return false;
      v = v * 10 + (text[i] - '0');
    }
    *out = v;
    return true;
  };
  int64_t year, month, day, hour, minute, second;
  if (!digits(0, 4, &year) || text.size() < 19 || text[4] != '-' || !digits(5, 2, &month) || text[7] != '-' ||
      !digits(8, 2, &day) || (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !digits(11, 2, &hour) ||
      text[13] != ':' || !digits(14, 2, &minute) || text[16] != ':' || !digits(17, 2, &second)) {
    return bad("it is not of the form YYYY-MM-DDThh:mm:ss");
  }
  static constexpr int kDaysIn[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month < 1 || month > 12 || day < 1 || day > kDaysIn[month - 1] || (month == 2 && day == 29 && !leap)) {
    return bad("no such date");
  }
  if (hour > 23 || minute > 59 || second > 60) return bad("no such time of day");
  if (second == 60) second = 59;  // a leap second is the last millisecond of its minute
  size_t i = 19;
  int64_t millis = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    size_t start = i;
    while (i < text.size() && IsDigit(text[i])) {
      if (i - start < 3) millis = millis * 10 + (text[i] - '0');
      ++i;
    }
    if (i == start) return bad("a fraction of a second has no digits");
    for (size_t n = i - start; n < 3; ++n) millis *= 10;
  }
  int64_t offset_min = 0;
  if (i < text.size() && (text[i] == 'Z' || text[i] == 'z')) {
    ++i;
  } else if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    int64_t oh, om;
    if (!digits(i + 1, 2, &oh) || i + 3 >= text.size() || text[i + 3] != ':' || !digits(i + 4, 2, &om) || oh > 23 ||
        om > 59) {
      return bad("bad time zone offset");
    }
    offset_min = (oh * 60 + om) * (text[i] == '-' ? -1 : 1);
    i += 6;
  } else {
    return bad("it has no time zone (add \"Z\" for UTC)");
  }
  if (i != text.size()) return bad("unexpected characters after the time zone");
  int64_t days = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  int64_t secs = days * 86400 + hour * 3600 + minute * 60 + second - offset_min * 60;
  return secs * 1000 + millis;
}

std::string FormatTimestamp(int64_t epoch_ms) {
  int64_t secs = epoch_ms >= 0 ? epoch_ms / 1000 : (epoch_ms - 999) / 1000;
  int64_t millis = epoch_ms - secs * 1000;
  int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  int64_t rem = secs - days * 86400;
  int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", y, m, d, rem / 3600, (rem / 60) % 60, rem % 60,
                     millis);
}

}  // namespace delayq
