#include "core/trace_context.h"

#include <fmt/format.h>

#include <set>

namespace delayq {
namespace {

bool LowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool AllZeros(std::string_view s) { return s.find_first_not_of('0') == std::string_view::npos; }

bool LowerAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool Digit(char c) { return c >= '0' && c <= '9'; }
bool KeyChar(char c) { return LowerAlpha(c) || Digit(c) || c == '_' || c == '-' || c == '*' || c == '/'; }

// W3C's key: simple-key = lcalpha 0*255(keychar), or tenant-id "@" system-id with tenant-id =
// (lcalpha / DIGIT) 0*240(keychar) and system-id = lcalpha 0*13(keychar).
bool ValidKey(std::string_view key) {
  const size_t at = key.find('@');
  auto run = [](std::string_view s, size_t most, bool digit_first) {
    if (s.empty() || s.size() > most + 1) return false;
    if (!(LowerAlpha(s[0]) || (digit_first && Digit(s[0])))) return false;
    for (char c : s.substr(1)) {
      if (!KeyChar(c)) return false;
    }
    return true;
  };
  if (at == std::string_view::npos) return run(key, 255, false);
  return run(key.substr(0, at), 240, true) && run(key.substr(at + 1), 13, false);
}

// W3C's value: 0*255(chr) nblk-chr, chr = " " / nblk-chr, nblk-chr = printable ASCII but "," "=".
bool ValidValue(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (char c : value) {
    if (c < 0x20 || c > 0x7e || c == ',' || c == '=') return false;
  }
  return true;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string TraceShown(std::string_view value) {
  return value.size() <= 80 ? std::string(value) : fmt::format("{}... ({} bytes)", value.substr(0, 80), value.size());
}

// What a later version adds after the 55 characters: "-" and visible ASCII.
bool LaterFields(std::string_view rest) {
  if (rest.empty()) return true;
  if (rest[0] != '-') return false;
  for (char c : rest) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

Status ValidateTraceParent(std::string_view v, std::string_view field) {
  const bool shape = v.size() >= 55 && v.size() <= kMaxTraceParent && v[2] == '-' && v[35] == '-' && v[52] == '-' &&
                     LowerHex(v.substr(0, 2)) && LowerHex(v.substr(3, 32)) && LowerHex(v.substr(36, 16)) &&
                     LowerHex(v.substr(53, 2));
  const bool version_ok =
      shape && v.substr(0, 2) != "ff" && (v.size() == 55 || (v.substr(0, 2) != "00" && LaterFields(v.substr(55))));
  if (!version_ok) {
    return Status::InvalidArgument(fmt::format(
        "{} is \"{}\"; a W3C traceparent is 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, in lower case, "
        "as 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 (a version after 00 may add -fields of "
        "visible ASCII, up to {} characters in all)",
        field, TraceShown(v), kMaxTraceParent));
  }
  if (AllZeros(v.substr(3, 32)) || AllZeros(v.substr(36, 16))) {
    return Status::InvalidArgument(
        fmt::format("{} is \"{}\"; its trace id and parent id may not be all zeros (W3C: an invalid context)", field,
                    TraceShown(v)));
  }
  return Status::Ok();
}

Status ValidateTraceState(std::string_view v, std::string_view field) {
  if (v.size() > kMaxTraceState) {
    return Status::InvalidArgument(
        fmt::format("{} has {} bytes; at most {} are kept (W3C asks for 512)", field, v.size(), kMaxTraceState));
  }
  std::set<std::string_view> keys;
  size_t members = 0;
  while (true) {
    const size_t comma = v.find(',');
    const std::string_view member = TrimSpaces(v.substr(0, comma));
    if (!member.empty()) {
      const size_t eq = member.find('=');
      const bool ok =
          eq != std::string_view::npos && ValidKey(member.substr(0, eq)) && ValidValue(member.substr(eq + 1));
      if (!ok) {
        return Status::InvalidArgument(fmt::format(
            "{} has the member \"{}\"; a W3C tracestate member is key=value: the key a lower case letter, then up to "
            "255 of a-z 0-9 _-*/ (or tenant@system: up to 241 and 14), the value 1 to 256 printable ASCII characters "
            "without , or =",
            field, TraceShown(member)));
      }
      if (!keys.insert(member.substr(0, eq)).second) {
        return Status::InvalidArgument(
            fmt::format("{} names the key \"{}\" twice; each key appears once", field, member.substr(0, eq)));
      }
      if (++members > 32) {
        return Status::InvalidArgument(fmt::format("{} has more than 32 members; W3C allows 32", field));
      }
    }
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return Status::Ok();
}

Status ValidateTraceHeaders(const Headers& headers, std::string_view prefix) {
  const auto parent = headers.find(std::string(kTraceParent));
  const auto state = headers.find(std::string(kTraceState));
  if (parent != headers.end()) {
    DELAYQ_RETURN_IF_ERROR(ValidateTraceParent(parent->second, fmt::format("{}traceparent", prefix)));
  }
  if (state == headers.end()) return Status::Ok();
  if (parent == headers.end()) {
    return Status::InvalidArgument(fmt::format(
        "{}tracestate is given without a traceparent; W3C reads a tracestate only beside its traceparent", prefix));
  }
  return ValidateTraceState(state->second, fmt::format("{}tracestate", prefix));
}

std::optional<std::string_view> TraceIdOf(std::string_view traceparent) {
  if (!ValidateTraceParent(traceparent, "").ok()) return std::nullopt;
  return traceparent.substr(3, 32);
}

}  // namespace delayq
