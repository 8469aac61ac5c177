#include "schedule/cron.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <vector>

#include "schedule/floor_div.h"

namespace delayq {
namespace {

struct FieldSpec {
  const char* name;
  const char* plural;
  int lo, hi;
  std::array<const char*, 13> names;  // value - names_base -> name (empty: none)
  int names_base;
};

constexpr FieldSpec kSecond{"second", "seconds", 0, 59, {}, 0};
constexpr FieldSpec kMinute{"minute", "minutes", 0, 59, {}, 0};
constexpr FieldSpec kHour{"hour", "hours", 0, 23, {}, 0};
constexpr FieldSpec kDay{"day of month", "days of the month", 1, 31, {}, 0};
constexpr FieldSpec kMonth{
    "month",
    "months",
    1,
    12,
    {"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC", nullptr},
    1};
// 7 is Sunday too (folded into 0 after parsing).
constexpr FieldSpec kWeekday{
    "day of week", "days of the week", 0, 7, {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", nullptr}, 0};

class FieldParser {
 public:
  FieldParser(std::string_view expr, int position, const FieldSpec& spec) : expr_(expr), pos_(position), spec_(spec) {}

  Status Error(std::string_view part, std::string_view why) const {
    return Status::InvalidArgument(
        fmt::format(R"(cron "{}": field {} ({}) "{}" {})", expr_, pos_, spec_.name, part, why));
  }

  // One value: a number or a name.
  Status Value(std::string_view text, std::string_view part, int* out) const {
    if (text.empty()) return Error(part, "has an empty value; write a number or *");
    if (std::isalpha(static_cast<unsigned char>(text[0]))) {
      std::string upper;
      for (char c : text) upper.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
      for (size_t i = 0; i < spec_.names.size() && spec_.names[i]; ++i) {
        if (upper == spec_.names[i]) {
          *out = static_cast<int>(i) + spec_.names_base;
          return Status::Ok();
        }
      }
      if (!spec_.names[0])
        return Error(part, fmt::format("is not a number; {} are {}-{}", spec_.plural, spec_.lo, spec_.hi));
      return Error(part, fmt::format("names no {}; use {}-{} or {}...{}", spec_.name, spec_.lo, spec_.hi,
                                     spec_.names[0], spec_.name == kMonth.name ? "DEC" : "SAT"));
    }
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, *out);
    if (ec != std::errc() || ptr != end) {
      return Error(part, fmt::format("is not a number; {} are {}-{}", spec_.plural, spec_.lo, spec_.hi));
    }
    if (*out < spec_.lo || *out > spec_.hi) {
      return Error(part, fmt::format("is out of range: {} are {}-{}", spec_.plural, spec_.lo, spec_.hi));
    }
    return Status::Ok();
  }

  // The whole field into `bits` (indexes are the values); `star`: it starts with `*`.
  template <size_t N>
  Status Parse(std::string_view field, std::bitset<N>* bits, bool* star) {
    *star = !field.empty() && field[0] == '*';
    size_t start = 0;
    while (start <= field.size()) {
      size_t comma = field.find(',', start);
      if (comma == std::string_view::npos) comma = field.size();
      std::string_view item = field.substr(start, comma - start);
      DELAYQ_RETURN_IF_ERROR(Item(item, bits));
      start = comma + 1;
    }
    return Status::Ok();
  }

 private:
  template <size_t N>
  Status Item(std::string_view item, std::bitset<N>* bits) {
    if (item.empty()) return Error(item, "has an empty list entry; write a,b,c without spaces or empty parts");
    std::string_view range = item;
    int step = 1;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      range = item.substr(0, slash);
      std::string_view step_text = item.substr(slash + 1);
      const char* end = step_text.data() + step_text.size();
      auto [ptr, ec] = std::from_chars(step_text.data(), end, step);
      if (step_text.empty() || ec != std::errc() || ptr != end || step < 1 || step > spec_.hi - spec_.lo + 1) {
        return Error(item, fmt::format("has a bad step; after / comes a number from 1 to {}", spec_.hi - spec_.lo + 1));
      }
    }
    int lo = spec_.lo, hi = spec_.hi;
    if (range == "*") {
      // every value
    } else if (size_t dash = range.find('-'); dash != std::string_view::npos) {
      DELAYQ_RETURN_IF_ERROR(Value(range.substr(0, dash), item, &lo));
      DELAYQ_RETURN_IF_ERROR(Value(range.substr(dash + 1), item, &hi));
      if (lo > hi) {
        return Error(item, fmt::format("runs backwards; a range goes from low to high (write {}-{},{}-{})", lo,
                                       spec_.hi, spec_.lo, hi));
      }
    } else {
      DELAYQ_RETURN_IF_ERROR(Value(range, item, &lo));
      // `a/n` runs from a to the field's end; a lone `a` is just a.
      hi = item.find('/') == std::string_view::npos ? lo : spec_.hi;
    }
    for (int v = lo; v <= hi; v += step) bits->set(static_cast<size_t>(v));
    return Status::Ok();
  }

  std::string_view expr_;
  int pos_;
  const FieldSpec& spec_;
};

std::string_view Macro(std::string_view text) {
  if (text == "@yearly" || text == "@annually") return "0 0 1 1 *";
  if (text == "@monthly") return "0 0 1 * *";
  if (text == "@weekly") return "0 0 * * 0";
  if (text == "@daily" || text == "@midnight") return "0 0 * * *";
  if (text == "@hourly") return "0 * * * *";
  return {};
}

// The first set bit at or after `from`, or -1.
template <size_t N>
int NextSet(const std::bitset<N>& bits, int from) {
  for (int i = from; i < static_cast<int>(N); ++i) {
    if (bits[static_cast<size_t>(i)]) return i;
  }
  return -1;
}

}  // namespace

Result<CronExpr> CronExpr::Parse(std::string_view text) {
  CronExpr e;
  e.text_ = std::string(text);
  std::string_view body = text;
  if (!text.empty() && text[0] == '@') {
    body = Macro(text);
    if (body.empty()) {
      return Status::InvalidArgument(fmt::format(
          R"(cron "{}" is not a known macro; use @yearly, @monthly, @weekly, @daily or @hourly, or 5 or 6 fields)",
          text));
    }
  }
  std::vector<std::string_view> fields;
  for (size_t i = 0; i < body.size();) {
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    size_t j = i;
    while (j < body.size() && !std::isspace(static_cast<unsigned char>(body[j]))) ++j;
    if (j > i) fields.push_back(body.substr(i, j - i));
    i = j;
  }
  if (fields.size() != 5 && fields.size() != 6) {
    return Status::InvalidArgument(fmt::format(
        R"(cron "{}" has {} fields; write 5 (minute hour day-of-month month day-of-week) or 6 (seconds first))", text,
        fields.size()));
  }
  const bool with_seconds = fields.size() == 6;
  size_t f = 0;
  bool star;
  if (with_seconds) {
    DELAYQ_RETURN_IF_ERROR(FieldParser(text, 1, kSecond).Parse(fields[f++], &e.seconds_, &star));
  } else {
    e.seconds_.set(0);
  }
  const int base = with_seconds ? 1 : 0;
  DELAYQ_RETURN_IF_ERROR(FieldParser(text, base + 1, kMinute).Parse(fields[f++], &e.minutes_, &star));
  DELAYQ_RETURN_IF_ERROR(FieldParser(text, base + 2, kHour).Parse(fields[f++], &e.hours_, &star));
  DELAYQ_RETURN_IF_ERROR(FieldParser(text, base + 3, kDay).Parse(fields[f++], &e.days_, &e.days_star_));
  DELAYQ_RETURN_IF_ERROR(FieldParser(text, base + 4, kMonth).Parse(fields[f++], &e.months_, &star));
  std::bitset<8> weekdays;
  DELAYQ_RETURN_IF_ERROR(FieldParser(text, base + 5, kWeekday).Parse(fields[f++], &weekdays, &e.weekdays_star_));
  for (size_t d = 0; d < 7; ++d) e.weekdays_[d] = weekdays[d];
  if (weekdays[7]) e.weekdays_.set(0);  // 7 is Sunday
  // A day-of-month that no chosen month has (31 April, 30 February) never comes.
  if (!e.NextAtOrAfter(0)) {
    return Status::InvalidArgument(
        fmt::format(R"(cron "{}" never matches: no chosen month has the chosen day of the month)", text));
  }
  return e;
}

bool CronExpr::DayMatches(int64_t days_since_epoch) const {
  using namespace std::chrono;
  const sys_days day{days{days_since_epoch}};
  const year_month_day ymd{day};
  const bool dom = days_[static_cast<unsigned>(ymd.day())];
  const bool dow = weekdays_[weekday{day}.c_encoding()];
  if (days_star_ || weekdays_star_) return dom && dow;
  return dom || dow;
}

bool CronExpr::Matches(CivilSeconds t) const {
  using namespace std::chrono;
  const int64_t day = FloorDiv(t, 86'400), sod = t - day * 86'400;
  const year_month_day ymd{sys_days{days{day}}};
  return months_[static_cast<unsigned>(ymd.month())] && DayMatches(day) && hours_[static_cast<size_t>(sod / 3600)] &&
         minutes_[static_cast<size_t>(sod / 60 % 60)] && seconds_[static_cast<size_t>(sod % 60)];
}

std::optional<CivilSeconds> CronExpr::NextAtOrAfter(CivilSeconds t) const {
  using namespace std::chrono;
  const CivilSeconds limit = t + 30LL * 366 * 86'400;
  while (t <= limit) {
    const int64_t day = FloorDiv(t, 86'400), sod = t - day * 86'400;
    const int64_t midnight = day * 86'400;
    const year_month_day ymd{sys_days{days{day}}};
    if (!months_[static_cast<unsigned>(ymd.month())]) {
      const sys_days first_of_next{(ymd.year() / ymd.month() / 1) + months{1}};
      t = first_of_next.time_since_epoch().count() * 86'400LL;
      continue;
    }
    if (!DayMatches(day)) {
      t = midnight + 86'400;
      continue;
    }
    const int h = static_cast<int>(sod / 3600), m = static_cast<int>(sod / 60 % 60), s = static_cast<int>(sod % 60);
    if (!hours_[static_cast<size_t>(h)]) {
      const int next = NextSet(hours_, h + 1);
      t = next < 0 ? midnight + 86'400 : midnight + next * 3600LL;
      continue;
    }
    if (!minutes_[static_cast<size_t>(m)]) {
      const int next = NextSet(minutes_, m + 1);
      t = next < 0 ? midnight + (h + 1) * 3600LL : midnight + h * 3600LL + next * 60LL;
      continue;
    }
    if (!seconds_[static_cast<size_t>(s)]) {
      const int next = NextSet(seconds_, s + 1);
      t = next < 0 ? midnight + h * 3600LL + (m + 1) * 60LL : midnight + h * 3600LL + m * 60LL + next;
      continue;
    }
    return t;
  }
  return std::nullopt;
}

}  // namespace delayq
