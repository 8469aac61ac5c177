#include "http/json.h"

#include <malloc.h>

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>

#include "core/duration.h"
#include "core/validate.h"

namespace delayq::http {
namespace sj = simdjson::ondemand;

// ---------------------------------------------------------------------------------------------
// Writer

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  Separate();
  out_.push_back('{');
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  out_.push_back('}');
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::BeginArray() {
  Separate();
  out_.push_back('[');
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  out_.push_back(']');
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::Key(std::string_view key) {
  String(key);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view s) {
  Separate();
  out_.push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    unsigned char c = *p;
    if (c < 0x80) {
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            out_ += fmt::format("\\u{:04x}", c);
          } else {
            out_.push_back(static_cast<char>(c));
          }
      }
      ++p;
      continue;
    }
    // A multi-byte UTF-8 sequence: copy it when valid, else write U+FFFD for one byte.
    int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    bool ok = len > 0 && end - p >= len &&
              simdjson::validate_utf8(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    if (ok) {
      out_.append(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
      p += len;
    } else {
      out_ += "\xef\xbf\xbd";
      ++p;
    }
  }
  out_.push_back('"');
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t v) {
  Separate();
  out_ += fmt::format("{}", v);
  return *this;
}
JsonWriter& JsonWriter::Uint(uint64_t v) {
  Separate();
  out_ += fmt::format("{}", v);
  return *this;
}
JsonWriter& JsonWriter::Double(double v) {
  Separate();
  if (!std::isfinite(v)) v = 0;
  out_ += fmt::format("{}", v);
  return *this;
}
JsonWriter& JsonWriter::Bool(bool v) {
  Separate();
  out_ += v ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::Null() {
  Separate();
  out_ += "null";
  return *this;
}
JsonWriter& JsonWriter::Raw(std::string_view json) {
  Separate();
  out_ += json;
  return *this;
}

// ---------------------------------------------------------------------------------------------
// Base64 (RFC 4648, standard alphabet). Written here because neither the standard library nor
// the packaged JSON/HTTP libraries offer a public base64 codec (Beast's is in a detail namespace).

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
int B64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) |
                 static_cast<uint8_t>(in[i + 2]);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], kB64[v & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], '='};
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = B64Value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

simdjson::dom::parser& Validator() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

// The DOM parser keeps buffers of several times the largest document it has parsed, for the
// life of its thread: three 60 MiB bodies left 2.3 GiB resident. Past kKeepParserBytes they are
// given back after the parse (and glibc is asked to return the pages), so memory goes back near
// its baseline after a large request.
constexpr size_t kKeepParserBytes = 1 << 20;
struct ShrinkValidatorAfterUse {
  ~ShrinkValidatorAfterUse() {
    auto& parser = Validator();
    if (parser.capacity() > kKeepParserBytes) {
      parser = simdjson::dom::parser{};
      ::malloc_trim(0);
    }
  }
};

// Validates the whole body (UTF-8, syntax, nesting) before the on-demand walk, which skips
// over what it does not read without checking it.
Status ValidateBody(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Status::InvalidArgument("the request body is empty; expected a JSON object");
  }
  ShrinkValidatorAfterUse shrink;
  auto& parser = Validator();
  if (parser.capacity() < body.size() || parser.max_depth() != kMaxJsonDepth) {
    if (parser.allocate(std::max<size_t>(body.size(), 4096), kMaxJsonDepth) != simdjson::SUCCESS) {
      return Status::ResourceExhausted("cannot allocate memory to parse the request body");
    }
  }
  simdjson::dom::element root;
  auto error = parser.parse(body.data(), body.size(), true).get(root);
  if (error == simdjson::DEPTH_ERROR) {
    return Status::InvalidArgument(
        fmt::format("the request body nests deeper than {} levels", kMaxJsonDepth));
  }
  if (error == simdjson::NUMBER_ERROR) {
    return Status::InvalidArgument(
        "a number in the request body is malformed or out of range (integers must fit in 64 bits)");
  }
  if (error == simdjson::UTF8_ERROR) {
    return Status::InvalidArgument("the request body is not valid UTF-8");
  }
  if (error) {
    return Status::InvalidArgument(
        fmt::format("the request body is not valid JSON ({})", simdjson::error_message(error)));
  }
  if (!root.is_object()) {
    return Status::InvalidArgument("the request body must be a JSON object");
  }
  return Status::Ok();
}

// The walk: a padded copy of the body and the on-demand parser over it.
struct Doc {
  simdjson::padded_string text;
  sj::parser parser;
  sj::document doc;
};

Result<std::unique_ptr<Doc>> Open(std::string_view body) {
  DELAYQ_RETURN_IF_ERROR(ValidateBody(body));
  auto d = std::make_unique<Doc>();
  d->text = simdjson::padded_string(body);
  if (d->parser.iterate(d->text).get(d->doc)) {
    return Status::InvalidArgument("the request body is not valid JSON");
  }
  return d;
}

Status TypeError(std::string_view field, std::string_view expected) {
  return Status::InvalidArgument(fmt::format("{} must be {}", field, expected));
}

Status GetInt(sj::value v, std::string_view field, int64_t* out, std::string_view expected) {
  if (v.get_int64().get(*out)) return TypeError(field, expected);
  return Status::Ok();
}

Status GetString(sj::value v, std::string_view field, std::string* out) {
  std::string_view s;
  if (v.get_string().get(s)) return TypeError(field, "a string");
  out->assign(s);
  return Status::Ok();
}

Status GetBool(sj::value v, std::string_view field, bool* out) {
  if (v.get_bool().get(*out)) return TypeError(field, "true or false");
  return Status::Ok();
}

// The exact text of a JSON value (the body was validated, so it is valid JSON).
Status RawValue(sj::value v, std::string_view field, std::string* out) {
  sj::json_type type;
  if (v.type().get(type)) return TypeError(field, "a JSON value");
  std::string_view raw;
  simdjson::error_code error = simdjson::SUCCESS;
  if (type == sj::json_type::object) {
    sj::object o;
    error = v.get_object().get(o);
    if (!error) error = o.raw_json().get(raw);
  } else if (type == sj::json_type::array) {
    sj::array a;
    error = v.get_array().get(a);
    if (!error) error = a.raw_json().get(raw);
  } else {
    raw = v.raw_json_token();
  }
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' ||
                          raw.back() == '\t')) {
    raw.remove_suffix(1);
  }
  if (error) return TypeError(field, "a JSON value");
  out->assign(raw);
  return Status::Ok();
}

// Refuses a second due time: a delay with a deliver_at in the words every store uses
// (ValidateWhen), or the two spellings of a delay.
Status OneWhen(std::string_view key, const When& when, std::string_view prefix) {
  const bool delay = key != "deliver_at";
  if ((delay && when.deliver_at_ms) || (!delay && when.delay_ms)) {
    return ValidateWhen({.delay_ms = 0, .deliver_at_ms = 0}, QueueConfig{}, prefix);
  }
  if (when.delay_ms) {
    return Status::InvalidArgument(
        fmt::format("{}delay_ms and {}delay are both given; give one of them", prefix, prefix));
  }
  return Status::Ok();
}

// "delay_ms" | "delay" | "deliver_at" into `when`; false when `key` is none of them.
Result<bool> ParseWhenField(std::string_view key, sj::value v, std::string_view prefix, When* when) {
  const std::string field = fmt::format("{}{}", prefix, key);
  if (key == "delay_ms") {
    int64_t ms;
    DELAYQ_RETURN_IF_ERROR(GetInt(v, field, &ms, "an integer number of milliseconds"));
    if (ms < 0) return Status::InvalidArgument(fmt::format("{} is {}; it must not be negative", field, ms));
    DELAYQ_RETURN_IF_ERROR(OneWhen(key, *when, prefix));
    when->delay_ms = ms;
    return true;
  }
  if (key == "delay") {
    std::string text;
    DELAYQ_RETURN_IF_ERROR(GetString(v, field, &text));
    auto ms = ParseDuration(text);
    if (!ms.ok()) return Status::InvalidArgument(fmt::format("{}: {}", field, ms.status().message()));
    DELAYQ_RETURN_IF_ERROR(OneWhen(key, *when, prefix));
    when->delay_ms = *ms;
    return true;
  }
  if (key == "deliver_at") {
    sj::json_type type;
    if (v.type().get(type)) return TypeError(field, "a timestamp");
    int64_t at;
    if (type == sj::json_type::number) {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, field, &at, "epoch milliseconds or an RFC 3339 string"));
    } else if (type == sj::json_type::string) {
      std::string text;
      DELAYQ_RETURN_IF_ERROR(GetString(v, field, &text));
      auto parsed = ParseTimestamp(text);
      if (!parsed.ok()) {
        return Status::InvalidArgument(fmt::format("{}: {}", field, parsed.status().message()));
      }
      at = *parsed;
    } else {
      return TypeError(field, "epoch milliseconds or an RFC 3339 string");
    }
    DELAYQ_RETURN_IF_ERROR(OneWhen(key, *when, prefix));
    when->deliver_at_ms = at;
    return true;
  }
  return false;
}

Result<EnqueueRequest> ParseJob(sj::object obj, std::string_view prefix) {
  EnqueueRequest r;
  bool have_payload = false;
  for (auto f : obj) {
    std::string_view key;
    if (f.unescaped_key().get(key)) return Status::InvalidArgument("a field name is not a string");
    sj::value v;
    if (f.value().get(v)) return Status::InvalidArgument("a field value is malformed");
    const std::string field = fmt::format("{}{}", prefix, key);
    auto when = ParseWhenField(key, v, prefix, &r.when);
    if (!when.ok()) return when.status();
    if (*when) continue;
    if (key == "payload") {
      if (have_payload) {
        return Status::InvalidArgument(fmt::format(
            "{}payload and {}payload_base64 are both given; give one", prefix, prefix));
      }
      DELAYQ_RETURN_IF_ERROR(RawValue(v, field, &r.payload));
      have_payload = true;
    } else if (key == "payload_base64") {
      if (have_payload) {
        return Status::InvalidArgument(fmt::format(
            "{}payload and {}payload_base64 are both given; give one", prefix, prefix));
      }
      std::string text;
      DELAYQ_RETURN_IF_ERROR(GetString(v, field, &text));
      auto bytes = Base64Decode(text);
      if (!bytes) return TypeError(field, "standard base64 (RFC 4648)");
      r.payload = std::move(*bytes);
      r.binary = true;
      have_payload = true;
    } else if (key == "key") {
      DELAYQ_RETURN_IF_ERROR(GetString(v, field, &r.key));
    } else if (key == "replace") {
      DELAYQ_RETURN_IF_ERROR(GetBool(v, field, &r.replace));
    } else if (key == "max_attempts") {
      int64_t n;
      DELAYQ_RETURN_IF_ERROR(GetInt(v, field, &n, "an integer from 1 to 1000"));
      if (n < 1 || n > Limits::kMaxAttempts) {
        return Status::InvalidArgument(fmt::format("{} is {}; it must be between 1 and {}", field,
                                                   n, Limits::kMaxAttempts));
      }
      r.max_attempts = static_cast<int32_t>(n);
    } else if (key == "headers") {
      sj::object h;
      if (v.get_object().get(h)) return TypeError(field, "an object of strings");
      for (auto hf : h) {
        std::string_view name;
        if (hf.unescaped_key().get(name)) return TypeError(field, "an object of strings");
        sj::value hv;
        std::string value;
        if (hf.value().get(hv)) return TypeError(field, "an object of strings");
        DELAYQ_RETURN_IF_ERROR(GetString(hv, fmt::format("{}.{}", field, name), &value));
        r.headers[std::string(name)] = std::move(value);
      }
    }
  }
  if (!have_payload) {
    return Status::InvalidArgument(fmt::format(
        "{}payload is missing; give \"payload\" (any JSON value) or \"payload_base64\"", prefix));
  }
  return r;
}

}  // namespace

bool IsJsonValue(std::string_view bytes) {
  if (bytes.empty()) return false;
  ShrinkValidatorAfterUse shrink;
  auto& parser = Validator();
  if (parser.capacity() < bytes.size() || parser.max_depth() != kMaxJsonDepth) {
    if (parser.allocate(std::max<size_t>(bytes.size(), 4096), kMaxJsonDepth)) return false;
  }
  simdjson::dom::element e;
  return !parser.parse(bytes.data(), bytes.size(), true).get(e);
}

Result<EnqueueBody> ParseEnqueue(std::string_view body) {
  auto d = Open(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  // {"jobs": [...]} is a batch; anything else is one job. Look for "jobs" first.
  sj::value jobs;
  auto error = obj.find_field_unordered("jobs").get(jobs);
  EnqueueBody out;
  if (!error) {
    sj::array arr;
    if (jobs.get_array().get(arr)) return TypeError("jobs", "an array of jobs");
    out.batch = true;
    size_t i = 0;
    for (auto element : arr) {
      sj::object job;
      const std::string prefix = fmt::format("jobs[{}].", i);
      if (element.get_object().get(job)) return TypeError(fmt::format("jobs[{}]", i), "an object");
      auto r = ParseJob(job, prefix);
      if (!r.ok()) return r.status();
      out.jobs.push_back(std::move(*r));
      if (++i > Limits::kMaxBatch) {
        return Status::TooLarge(fmt::format("jobs has more than {} entries; send several batches",
                                            Limits::kMaxBatch));
      }
    }
    if (out.jobs.empty()) return ValidateBatchSize(0);
    return out;
  }
  if (obj.reset().error()) return Status::InvalidArgument("the body must be a JSON object");
  auto r = ParseJob(obj, "");
  if (!r.ok()) return r.status();
  out.jobs.push_back(std::move(*r));
  return out;
}

Result<ReserveRequest> ParseReserve(std::string_view body) {
  ReserveRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;  // all defaults
  auto d = Open(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    int64_t n;
    if (key == "max") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "max", &n, "an integer from 1 to 1000"));
      if (n < 1 || n > Limits::kMaxReserve) {
        return Status::InvalidArgument(fmt::format("max is {}; it must be between 1 and 1000", n));
      }
      r.max = static_cast<int32_t>(n);
    } else if (key == "wait_ms") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "wait_ms", &n, "an integer from 0 to 60000"));
      r.wait_ms = n;
    } else if (key == "lease_ms") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "lease_ms", &n, "an integer from 1000 to 43200000"));
      r.lease_ms = n;
    } else if (key == "max_bytes") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "max_bytes", &n, "an integer from 1 to 268435456"));
      r.max_bytes = n;
    }
  }
  DELAYQ_RETURN_IF_ERROR(ValidateReserve(r));
  return r;
}

Result<ReceiptsBody> ParseReceipts(std::string_view body) {
  auto d = Open(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  ReceiptsBody out;
  bool single = false;
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    int64_t n;
    if (key == "receipt") {
      std::string r;
      DELAYQ_RETURN_IF_ERROR(GetString(v, "receipt", &r));
      out.receipts.push_back(std::move(r));
      single = true;
    } else if (key == "receipts") {
      sj::array arr;
      if (v.get_array().get(arr)) return TypeError("receipts", "an array of strings");
      size_t i = 0;
      for (auto element : arr) {
        std::string_view s;
        if (element.get_string().get(s)) return TypeError(fmt::format("receipts[{}]", i), "a string");
        out.receipts.emplace_back(s);
        ++i;
      }
      out.batch = true;
    } else if (key == "retry_in_ms") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "retry_in_ms", &n, "an integer number of milliseconds"));
      out.retry_in_ms = n;
    } else if (key == "error") {
      DELAYQ_RETURN_IF_ERROR(GetString(v, "error", &out.error));
    } else if (key == "dead") {
      DELAYQ_RETURN_IF_ERROR(GetBool(v, "dead", &out.dead));
    } else if (key == "lease_ms") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "lease_ms", &n, "an integer from 1000 to 43200000"));
      out.lease_ms = n;
    }
  }
  if (single && out.batch) {
    return Status::InvalidArgument("receipt and receipts are both given; give one of them");
  }
  if (out.receipts.empty()) {
    return Status::InvalidArgument(out.batch ? "receipts is empty"
                                             : "receipt is missing; give \"receipt\" or \"receipts\"");
  }
  if (out.receipts.size() > Limits::kMaxBatch) {
    return Status::TooLarge(fmt::format("receipts has {} entries; at most {} are allowed",
                                        out.receipts.size(), Limits::kMaxBatch));
  }
  return out;
}

Result<When> ParseWhen(std::string_view body) {
  auto d = Open(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  When when;
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    auto r = ParseWhenField(key, v, "", &when);
    if (!r.ok()) return r.status();
  }
  if (!when.delay_ms && !when.deliver_at_ms) {
    return Status::InvalidArgument("give the new due time as delay_ms, delay or deliver_at");
  }
  return when;
}

Result<std::vector<std::string>> ParseReplay(std::string_view body) {
  std::vector<std::string> ids;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return ids;
  auto d = Open(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    if (key != "ids") continue;
    sj::array arr;
    if (v.get_array().get(arr)) return TypeError("ids", "an array of job ids");
    size_t i = 0;
    for (auto element : arr) {
      std::string_view s;
      if (element.get_string().get(s)) return TypeError(fmt::format("ids[{}]", i), "a string");
      ids.emplace_back(s);
      ++i;
    }
  }
  return ids;
}

Result<QueueConfig> ParseConfig(std::string_view body, const QueueConfig& base) {
  auto d = Open(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  QueueConfig c = base;
  auto get_double = [](sj::value v, std::string_view field, double* out) -> Status {
    if (v.get_double().get(*out)) return TypeError(field, "a number");
    return Status::Ok();
  };
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    int64_t n;
    if (key == "max_attempts") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, key, &n, "an integer"));
      if (n < 0 || n > INT32_MAX) return Status::InvalidArgument("max_attempts is out of range; it must be between 1 and 1000");
      c.max_attempts = static_cast<int32_t>(n);
    } else if (key == "lease_ms") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, key, &c.lease_ms, "an integer number of milliseconds"));
    } else if (key == "max_payload") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, key, &c.max_payload, "an integer number of bytes"));
    } else if (key == "dead_retention_ms") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, key, &c.dead_retention_ms, "an integer number of milliseconds"));
    } else if (key == "max_delay_ms") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, key, &c.max_delay_ms, "an integer number of milliseconds"));
    } else if (key == "backoff") {
      sj::object b;
      if (v.get_object().get(b)) return TypeError("backoff", "an object");
      for (auto bf : b) {
        std::string_view bkey;
        sj::value bv;
        if (bf.unescaped_key().get(bkey) || bf.value().get(bv)) return Status::InvalidArgument("malformed field");
        const std::string field = fmt::format("backoff.{}", bkey);
        if (bkey == "base_ms") {
          DELAYQ_RETURN_IF_ERROR(GetInt(bv, field, &c.backoff.base_ms, "an integer number of milliseconds"));
        } else if (bkey == "max_ms") {
          DELAYQ_RETURN_IF_ERROR(GetInt(bv, field, &c.backoff.max_ms, "an integer number of milliseconds"));
        } else if (bkey == "factor") {
          DELAYQ_RETURN_IF_ERROR(get_double(bv, field, &c.backoff.factor));
        } else if (bkey == "jitter") {
          DELAYQ_RETURN_IF_ERROR(get_double(bv, field, &c.backoff.jitter));
        }
      }
    }
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// Response bodies

void WritePayload(JsonWriter& w, std::string_view payload, bool binary) {
  if (!binary && IsJsonValue(payload)) {
    w.Key("payload").Raw(payload);
  } else {
    w.Key("payload_base64").String(Base64Encode(payload));
  }
}

namespace {
void WriteHeaders(JsonWriter& w, const Headers& headers) {
  w.Key("headers").BeginObject();
  for (const auto& [k, v] : headers) w.Key(k).String(v);
  w.EndObject();
}
}  // namespace

void WriteJob(JsonWriter& w, const Job& j) {
  w.BeginObject();
  w.Key("id").String(j.id);
  w.Key("queue").String(j.queue);
  w.Key("state").String(JobStateName(j.state));
  w.Key("due_at").Int(j.due_at_ms);
  w.Key("attempt").Int(j.attempt);
  w.Key("max_attempts").Int(j.max_attempts);
  if (j.key.empty()) {
    w.Key("key").Null();
  } else {
    w.Key("key").String(j.key);
  }
  WritePayload(w, j.payload, j.binary);
  WriteHeaders(w, j.headers);
  w.Key("created_at").Int(j.created_at_ms);
  if (j.last_error.empty()) {
    w.Key("last_error").Null();
  } else {
    w.Key("last_error").String(j.last_error);
  }
  if (j.state == JobState::kReserved) w.Key("lease_deadline").Int(j.lease_deadline_ms);
  if (j.state == JobState::kDead) w.Key("dead_at").Int(j.dead_at_ms);
  w.EndObject();
}

void WriteDelivery(JsonWriter& w, const Delivery& d) {
  w.BeginObject();
  w.Key("id").String(d.id);
  w.Key("receipt").String(d.receipt);
  WritePayload(w, d.payload, d.binary);
  WriteHeaders(w, d.headers);
  w.Key("attempt").Int(d.attempt);
  w.Key("max_attempts").Int(d.max_attempts);
  w.Key("due_at").Int(d.due_at_ms);
  if (d.key.empty()) {
    w.Key("key").Null();
  } else {
    w.Key("key").String(d.key);
  }
  w.Key("lease_deadline").Int(d.lease_deadline_ms);
  w.EndObject();
}

void WriteStats(JsonWriter& w, const QueueStats& s) {
  w.BeginObject();
  w.Key("name").String(s.name);
  w.Key("scheduled").Int(s.scheduled);
  w.Key("ready").Int(s.ready);
  w.Key("reserved").Int(s.reserved);
  w.Key("dead").Int(s.dead);
  w.Key("due_next_60s").Int(s.due_next_60s);
  if (s.earliest_due_at_ms) {
    w.Key("earliest_due_at").Int(*s.earliest_due_at_ms);
  } else {
    w.Key("earliest_due_at").Null();
  }
  w.Key("oldest_ready_ms").Int(s.oldest_ready_ms);
  w.Key("paused").Bool(s.paused);
  w.Key("counters").BeginObject();
  w.Key("enqueued").Uint(s.counters.enqueued);
  w.Key("delivered").Uint(s.counters.delivered);
  w.Key("acked").Uint(s.counters.acked);
  w.Key("nacked").Uint(s.counters.nacked);
  w.Key("redelivered").Uint(s.counters.redelivered);
  w.Key("dead").Uint(s.counters.dead);
  w.EndObject();
  w.Key("lateness_ms").BeginObject();
  w.Key("count").Uint(s.lateness.count);
  w.Key("p50").Double(s.lateness.p50_ms);
  w.Key("p90").Double(s.lateness.p90_ms);
  w.Key("p99").Double(s.lateness.p99_ms);
  w.Key("p999").Double(s.lateness.p999_ms);
  w.Key("max").Double(s.lateness.max_ms);
  w.Key("buckets").BeginArray();  // cumulative counts at each upper edge (ms)
  for (size_t i = 0; i < s.lateness.cumulative.size(); ++i) {
    w.BeginObject().Key("le").Double(LatenessSummary::kLatenessBucketsMs[i]);
    w.Key("count").Uint(s.lateness.cumulative[i]).EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.EndObject();
}

void WriteConfig(JsonWriter& w, const QueueConfig& c) {
  w.BeginObject();
  w.Key("max_attempts").Int(c.max_attempts);
  w.Key("backoff").BeginObject();
  w.Key("base_ms").Int(c.backoff.base_ms);
  w.Key("factor").Double(c.backoff.factor);
  w.Key("max_ms").Int(c.backoff.max_ms);
  w.Key("jitter").Double(c.backoff.jitter);
  w.EndObject();
  w.Key("lease_ms").Int(c.lease_ms);
  w.Key("max_payload").Int(c.max_payload);
  w.Key("dead_retention_ms").Int(c.dead_retention_ms);
  w.Key("max_delay_ms").Int(c.max_delay_ms);
  w.EndObject();
}

std::string ErrorBody(Code code, std::string_view message) {
  JsonWriter w;
  w.BeginObject().Key("error").BeginObject();
  w.Key("code").String(CodeName(code));
  w.Key("message").String(message);
  w.EndObject().EndObject();
  return w.Take();
}

}  // namespace delayq::http
