#include "store/postgres/pg_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/percent.h"

namespace delayq::postgres {

std::string HexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string FromHex(std::string_view hex) {
  auto digit = [](char c) { return std::max(0, HexValue(c)); };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(digit(hex[i]) << 4 | digit(hex[i + 1])));
  return out;
}

namespace {

// The length of the UTF-8 character at s[i..], or 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  if (n == 2 && c < 0xC2) return 0;  // overlong
  return n;
}

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace

std::string ValidText(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Length(text, i);
    const std::string_view ch = n == 0 ? std::string_view("\xEF\xBF\xBD") : text.substr(i, n);
    i += n == 0 ? 1 : n;
    if (ch == std::string_view("\0", 1)) continue;
    if (out.size() + ch.size() > max_bytes) break;
    out.append(ch);
  }
  return out;
}

Status ValidateText(const EnqueueRequest& r, std::string_view prefix) {
  auto bad = [&](std::string_view field) {
    return Status::InvalidArgument(fmt::format(
        "{}{} is not UTF-8 text; the PostgreSQL store keeps keys, groups and headers as text", prefix, field));
  };
  if (!IsUtf8(r.key)) return bad("key");
  if (!IsUtf8(r.group)) return bad("group");
  for (const auto& [name, value] : r.headers) {
    if (!IsUtf8(name) || !IsUtf8(value)) return bad("headers");
  }
  return Status::Ok();
}

std::string TextArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.push_back(',');
    out.push_back('"');
    for (char ch : items[i]) {
      if (ch == '"' || ch == '\\') out.push_back('\\');
      out.push_back(ch);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

QueueConfig ConfigFromRow(const Rows& r, int row, int col) {
  QueueConfig c;
  c.max_attempts = static_cast<int32_t>(r.Int(row, col + 0));
  c.backoff.base_ms = r.Int(row, col + 1);
  c.backoff.factor = r.Double(row, col + 2);
  c.backoff.max_ms = r.Int(row, col + 3);
  c.backoff.jitter = r.Double(row, col + 4);
  c.lease_ms = r.Int(row, col + 5);
  c.max_payload = r.Int(row, col + 6);
  c.dead_retention_ms = r.Int(row, col + 7);
  c.max_delay_ms = r.Int(row, col + 8);
  c.rate_per_s = r.Double(row, col + 9);
  c.burst = r.Int(row, col + 10);
  c.max_reserved = r.Int(row, col + 11);
  c.group_max_reserved = r.Int(row, col + 12);
  c.priority_aging_ms = r.Int(row, col + 13);
  c.keep_completed_ms = r.Int(row, col + 14);
  return c;
}

Param HeadersParam(const Headers& headers) {
  if (headers.empty()) return Param::Null();
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : headers) j[k] = v;
  // Bytes that are not UTF-8 cannot be JSON text: replaced rather than refused here (the
  // HTTP API only takes JSON strings, so only a C++ caller can give such bytes).
  return Param::Of(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

Result<Headers> ParseHeaders(std::string_view json) {
  Headers out;
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return Status::Corruption("a job's headers in PostgreSQL are not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.value().is_string()) out[it.key()] = it.value().get<std::string>();
  }
  return out;
}

Result<Job> JobFromRow(const std::string& queue, const Rows& r, int row, int64_t now_ms) {
  Job j;
  j.id = r.Str(row, 0);
  j.queue = queue;
  const std::string_view state = r.Text(row, 1);
  j.due_at_ms = r.Int(row, 2);
  j.state = state == "r"            ? JobState::kReserved
            : state == "d"          ? JobState::kDead
            : state == "c"          ? JobState::kCompleted
            : j.due_at_ms <= now_ms ? JobState::kReady
                                    : JobState::kScheduled;
  j.attempt = static_cast<int32_t>(r.Int(row, 3));
  j.max_attempts = static_cast<int32_t>(r.Int(row, 4));
  j.key = r.Str(row, 5);
  j.payload = r.Bytes(row, 6);
  j.binary = r.Bool(row, 7);
  if (!r.IsNull(row, 8)) {
    auto h = ParseHeaders(r.Text(row, 8));
    if (!h.ok()) return h.status();
    j.headers = std::move(*h);
  }
  j.created_at_ms = r.Int(row, 9);
  j.last_error = r.Str(row, 10);
  if (j.state == JobState::kReserved) j.lease_deadline_ms = r.Int(row, 11);
  if (j.state == JobState::kDead) j.dead_at_ms = r.Int(row, 12);
  j.priority = static_cast<int32_t>(r.Int(row, 13));
  j.group = r.Str(row, 14);
  if (j.state == JobState::kReserved) j.progress = r.Str(row, 15);
  if (j.state == JobState::kCompleted) {
    j.completed_at_ms = r.Int(row, 12);
    j.result = r.Str(row, 15);
  }
  return j;
}

}  // namespace delayq::postgres
