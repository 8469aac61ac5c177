#include "core/page_cursor.h"

#include <fmt/format.h>

#include <charconv>

namespace delayq {
namespace {

constexpr size_t kMaxTail = 40;
constexpr size_t kMaxShown = 60;

bool TailChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == '-';
}

std::string Shown(std::string_view text) {
  std::string s(text.substr(0, kMaxShown));
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e || c == '"') c = '?';
  }
  return text.size() > kMaxShown ? s + "..." : s;
}

}  // namespace

std::string EncodePageCursor(JobState state, const PageCursor& at) {
  return fmt::format("{}.{}.{}", JobStateName(state), at.ms, at.tail);
}

Status BadPageCursor(std::string_view text) {
  return Status::InvalidArgument(
      fmt::format("cursor \"{}\" is not one this listing gave out: pass the next_cursor of the page before, or "
                  "no cursor to start from the beginning",
                  Shown(text)));
}

Result<PageCursor> DecodePageCursor(std::string_view text, JobState state) {
  const size_t dot1 = text.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : text.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) return BadPageCursor(text);
  const std::string_view name = text.substr(0, dot1);
  const std::string_view ms = text.substr(dot1 + 1, dot2 - dot1 - 1);
  const std::string_view tail = text.substr(dot2 + 1);
  auto listed = ParseJobState(name);
  if (!listed) return BadPageCursor(text);
  if (*listed != state) {
    return Status::InvalidArgument(fmt::format(
        "cursor \"{}\" continues a listing of {} jobs, not of {} jobs: pass it with state={}, or no cursor to "
        "start the {} listing",
        Shown(text), name, JobStateName(state), name, JobStateName(state)));
  }
  PageCursor at;
  auto [end, ec] = std::from_chars(ms.data(), ms.data() + ms.size(), at.ms);
  if (ec != std::errc() || end != ms.data() + ms.size() || ms.empty() || at.ms < 0) return BadPageCursor(text);
  if (tail.empty() || tail.size() > kMaxTail) return BadPageCursor(text);
  for (char c : tail) {
    if (!TailChar(c)) return BadPageCursor(text);
  }
  at.tail = std::string(tail);
  return at;
}

Status ValidateListRequest(const ListRequest& request) {
  if (request.state == JobState::kCancelled) {
    return Status::InvalidArgument(
        "state cancelled is not listed (a cancelled job is deleted; only a wait for its outcome answers it): give "
        "scheduled, ready, reserved, dead or completed");
  }
  if (request.limit < 1 || request.limit > Limits::kMaxListPage) {
    return Status::InvalidArgument(
        fmt::format("limit is {}; it must be between 1 and {}", request.limit, Limits::kMaxListPage));
  }
  return Status::Ok();
}

}  // namespace delayq
