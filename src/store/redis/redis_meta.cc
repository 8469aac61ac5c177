#include "store/redis/redis_meta.h"

#include <fmt/format.h>

#include <charconv>
#include <vector>

namespace delayq::redis {
namespace {

bool Int(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= 0;
}

// "4|" length "|": the meta's bytes, then the record's. A format 4 value's meta is format 2 or 3.
Result<Meta> ParseFormatFour(std::string_view text) {
  text.remove_prefix(2);
  const size_t bar = text.find('|');
  int64_t length = 0;
  // At most 9 digits (a meta is far shorter), and a bar after them (npos is over 9 too).
  if (bar > 9 || !Int(text.substr(0, bar), &length) || static_cast<size_t>(length) > text.size() - bar - 1) {
    return Status::Corruption("a job's meta record in Redis is malformed (format 4 length)");
  }
  const std::string_view meta = text.substr(bar + 1, static_cast<size_t>(length));
  if (!meta.starts_with("2|") && !meta.starts_with("3|")) {
    return Status::Corruption("a job's meta record in Redis is malformed (format 4 holds no format 2 or 3 meta)");
  }
  auto m = ParseMeta(meta);
  if (!m.ok()) return m;
  m->has_record = true;
  m->record = std::string(text.substr(bar + 1 + static_cast<size_t>(length)));
  return m;
}

}  // namespace

Result<Meta> ParseMeta(std::string_view text) {
  if (text.starts_with("4|")) return ParseFormatFour(text);
  Meta m;
  m.format = 1;
  std::string_view body = text;
  if (!body.empty() && body.front() >= '0' && body.front() <= '9') {  // format 2 on: a version first
    const size_t bar = body.find('|');
    int64_t version = 0;
    if (bar == std::string_view::npos || !Int(body.substr(0, bar), &version)) {
      return Status::Corruption("a job's meta record in Redis is malformed (no format)");
    }
    if (version > kMetaFormat) {
      return Status::Unavailable(
          fmt::format("a job's meta record in Redis has format {}, newer than this delayq reads ({}); upgrade every "
                      "delayq server that shares this Redis",
                      version, kMetaFormat));
    }
    // A versioned meta is "2|" or "3|" (format 4 is "4|" and a length, above): no other spelling.
    if (body.substr(0, bar) != "2" && body.substr(0, bar) != "3") {
      return Status::Corruption("a job's meta record in Redis is malformed (format)");
    }
    m.format = static_cast<int>(version);
    body.remove_prefix(bar + 1);
  }
  // state|due|base|attempt|max|delivery|sid|key_indexed|key: eight bars, then the key.
  std::vector<std::string_view> f;
  for (int i = 0; i < 8; ++i) {
    const size_t bar = body.find('|');
    if (bar == std::string_view::npos) return Status::Corruption("a job's meta record in Redis is malformed");
    f.push_back(body.substr(0, bar));
    body.remove_prefix(bar + 1);
  }
  int64_t due, base, attempt, max;
  if (f[0].size() != 1 || !Int(f[1], &due) || !Int(f[2], &base) || !Int(f[3], &attempt) || !Int(f[4], &max) ||
      (f[7] != "0" && f[7] != "1")) {
    return Status::Corruption("a job's meta record in Redis is malformed");
  }
  m.state = f[0][0];
  m.due = due;
  m.base = static_cast<int32_t>(base);
  m.attempt = static_cast<int32_t>(attempt);
  m.max = static_cast<int32_t>(max);
  m.delivery = std::string(f[5]);
  m.sid = std::string(f[6]);
  m.key_indexed = f[7] == "1";
  if (m.format >= 3) {  // priority|group length|group key
    const size_t bar1 = body.find('|');
    const size_t bar2 = bar1 == std::string_view::npos ? bar1 : body.find('|', bar1 + 1);
    int64_t priority, length;
    if (bar2 == std::string_view::npos || !Int(body.substr(0, bar1), &priority) || priority > 9 ||
        !Int(body.substr(bar1 + 1, bar2 - bar1 - 1), &length) || static_cast<size_t>(length) > body.size() - bar2 - 1) {
      return Status::Corruption("a job's meta record in Redis is malformed (priority and group)");
    }
    m.priority = static_cast<int32_t>(priority);
    m.group = std::string(body.substr(bar2 + 1, static_cast<size_t>(length)));
    body.remove_prefix(bar2 + 1 + static_cast<size_t>(length));
  }
  m.key = std::string(body);
  return m;
}

std::string FormatMeta(const Meta& m) {
  std::string meta;
  if (m.priority != 0 || !m.group.empty()) {
    meta = fmt::format("3|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}{}", m.state, m.due, m.base, m.attempt, m.max, m.delivery,
                       m.sid, m.key_indexed ? 1 : 0, m.priority, m.group.size(), m.group, m.key);
  } else {
    meta = fmt::format("2|{}|{}|{}|{}|{}|{}|{}|{}|{}", m.state, m.due, m.base, m.attempt, m.max, m.delivery, m.sid,
                       m.key_indexed ? 1 : 0, m.key);
  }
  if (!m.has_record) return meta;
  return fmt::format("4|{}|{}{}", meta.size(), meta, m.record);
}

}  // namespace delayq::redis
