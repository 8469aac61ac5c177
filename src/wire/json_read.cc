#include "wire/json_read.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_set>
#include <vector>

#include "core/nearest.h"
#include "wire/json_writer.h"

namespace delayq::wire {
namespace {

// RFC 8259 leaves an object that names a field twice to its reader, and the field parsers here
// acted on every copy of some ("receipt" twice: both receipts touched, or acked under a 400 for
// the other) and on the last copy of others. A request's own objects are refused with a name
// twice, before anything is done. The JSON values a request carries to be kept as written (a
// payload, a progress, a result) are not looked into: their duplicates are kept, as given.
// The key `object` names twice, if any. Most objects are a job's few fields: a scan of them
// allocates nothing.
std::optional<std::string_view> KeyTwice(const simdjson::dom::object& object) {
  constexpr size_t kScan = 16;
  if (object.size() <= kScan) {
    std::array<std::string_view, kScan> keys;
    size_t n = 0;
    for (auto field : object) {
      if (std::find(keys.begin(), keys.begin() + n, field.key) != keys.begin() + n) return field.key;
      keys[n++] = field.key;
    }
    return std::nullopt;
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(object.size());
  for (auto field : object) {
    if (!seen.insert(field.key).second) return field.key;
  }
  return std::nullopt;
}

// Where a field is given twice, as the names leading to it from the body ({"jobs", "[1]",
// "headers", "a"}); empty when none is. Built only for an error: the walk formats nothing.
std::vector<std::string> FieldTwice(simdjson::dom::element e) {
  if (e.is_array()) {
    const simdjson::dom::array array = e.get_array().value_unsafe();
    size_t i = 0;
    for (simdjson::dom::element item : array) {
      auto inner = FieldTwice(item);
      if (!inner.empty()) {
        inner.insert(inner.begin(), fmt::format("[{}]", i));
        return inner;
      }
      ++i;
    }
    return {};
  }
  if (!e.is_object()) return {};
  const simdjson::dom::object object = e.get_object().value_unsafe();
  if (auto twice = KeyTwice(object)) return {std::string(*twice)};
  for (auto field : object) {
    if (field.key == "payload" || field.key == "progress" || field.key == "result") continue;  // kept as written
    auto inner = FieldTwice(field.value);
    if (!inner.empty()) {
      inner.insert(inner.begin(), std::string(field.key));
      return inner;
    }
  }
  return {};
}

// RFC 8259 leaves an object that names a field twice to its reader, and the field parsers here
// acted on every copy of some ("receipt" twice: both receipts touched, or acked under a 400 for
// the other) and on the last copy of others. A request's own objects are refused with a name
// twice, before anything is done. The JSON values a request carries to be kept as written (a
// payload, a progress, a result) are not looked into: their duplicates are kept, as given.
Status NoFieldTwice(simdjson::dom::element root) {
  const std::vector<std::string> where = FieldTwice(root);
  if (where.empty()) return Status::Ok();
  std::string field;
  for (const std::string& name : where) {
    if (!field.empty() && name[0] != '[') field += '.';
    field += name;
  }
  return Status::InvalidArgument(
      fmt::format("the field \"{}\" is given twice; give each field once", field.substr(0, 200)));
}

// Validates the whole body (UTF-8, syntax, nesting, no field twice) before the on-demand walk,
// which skips over what it does not read without checking it.
Status ValidateBody(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Status::InvalidArgument("the request body is empty; expected a JSON object");
  }
  ThreadDomParse parse(body, kMaxJsonDepth);
  if (parse.error() == simdjson::MEMALLOC) {
    return Status::ResourceExhausted("cannot allocate memory to parse the request body");
  }
  const simdjson::error_code error = parse.error();
  const simdjson::dom::element root = parse.root();
  if (error == simdjson::DEPTH_ERROR) {
    return Status::InvalidArgument(fmt::format("the request body nests deeper than {} levels", kMaxJsonDepth));
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
  return NoFieldTwice(root);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Request bodies (strict)

Result<std::unique_ptr<Doc>> OpenRequest(std::string_view body) {
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

Status UnknownField(std::string_view prefix, std::string_view key, std::span<const std::string_view> known) {
  std::string hint = DidYouMean(key, known);
  if (hint.empty()) hint = fmt::format("; the fields are {}", fmt::join(known, ", "));
  return Status::InvalidArgument(fmt::format("unknown field \"{}{}\"{}", prefix, key, hint));
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
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
    raw.remove_suffix(1);
  }
  if (error) return TypeError(field, "a JSON value");
  out->assign(raw);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Answers (lenient)

Status Malformed(std::string_view what) {
  return Status::Internal(fmt::format("the server's answer is not a valid {} response", what));
}

Result<std::unique_ptr<Doc>> OpenResponse(std::string_view body, std::string_view what) {
  auto d = std::make_unique<Doc>();
  d->text = simdjson::padded_string(body);
  if (d->parser.iterate(d->text).get(d->doc)) return Malformed(what);
  return d;
}

std::string Str(sj::value v) {
  std::string_view s;
  if (v.get_string().get(s)) return {};
  return std::string(s);
}

int64_t Int(sj::value v) {
  int64_t n = 0;
  if (v.get_int64().get(n)) {
    double d = 0;
    if (!v.get_double().get(d)) n = static_cast<int64_t>(d);
  }
  return n;
}

double Dbl(sj::value v) {
  double d = 0;
  Discard(v.get_double().get(d));
  return d;
}

std::string Raw(sj::value v) {
  sj::json_type type;
  if (v.type().get(type)) return {};
  std::string_view raw;
  if (type == sj::json_type::object) {
    sj::object o;
    if (!v.get_object().get(o)) Discard(o.raw_json().get(raw));
  } else if (type == sj::json_type::array) {
    sj::array a;
    if (!v.get_array().get(a)) Discard(a.raw_json().get(raw));
  } else {
    raw = v.raw_json_token();
  }
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
    raw.remove_suffix(1);
  }
  return std::string(raw);
}

bool IsNull(sj::value v) {
  bool null = false;
  return !v.is_null().get(null) && null;
}

Headers ReadHeaders(sj::value v) {
  Headers h;
  sj::object o;
  if (v.get_object().get(o)) return h;
  for (auto f : o) {
    std::string_view k;
    sj::value hv;
    if (f.unescaped_key().get(k) || f.value().get(hv)) continue;
    h[std::string(k)] = Str(hv);
  }
  return h;
}

JobState StateOf(std::string_view s) {
  if (s == "ready") return JobState::kReady;
  if (s == "reserved") return JobState::kReserved;
  if (s == "dead") return JobState::kDead;
  if (s == "completed") return JobState::kCompleted;
  if (s == "cancelled") return JobState::kCancelled;
  return JobState::kScheduled;
}

}  // namespace delayq::wire
