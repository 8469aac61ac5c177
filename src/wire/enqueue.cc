#include "wire/enqueue.h"

#include <fmt/format.h>

#include "core/trace_context.h"
#include "core/validate.h"
#include "wire/job.h"
#include "wire/job_content.h"
#include "wire/json_read.h"
#include "wire/when.h"

namespace delayq::wire {

namespace {

// The trace context is kept in the headers (core/trace_context.h); a job may give it as a field of
// its own or as a header, and both at once only when they agree.
Status PutTraceHeader(std::string_view name, std::string value, std::string_view prefix, EnqueueRequest* r) {
  auto [it, added] = r->headers.try_emplace(std::string(name), std::move(value));
  if (added || it->second == value) return Status::Ok();
  return Status::InvalidArgument(
      fmt::format("{0}{1} and {0}headers.{1} are both given, and differ; give the trace context once", prefix, name));
}

}  // namespace

Result<bool> ParseJobContentField(std::string_view key, sj::value v, std::string_view prefix, EnqueueRequest* r,
                                  bool* have_payload) {
  const std::string field = fmt::format("{}{}", prefix, key);
  if (key == "payload" || key == "payload_base64") {
    if (*have_payload) {
      return Status::InvalidArgument(
          fmt::format("{}payload and {}payload_base64 are both given; give one", prefix, prefix));
    }
    *have_payload = true;
    if (key == "payload") {
      DELAYQ_RETURN_IF_ERROR(RawValue(v, field, &r->payload));
      return true;
    }
    std::string text;
    DELAYQ_RETURN_IF_ERROR(GetString(v, field, &text));
    auto bytes = Base64Decode(text);
    if (!bytes) return TypeError(field, "standard base64 (RFC 4648)");
    r->payload = std::move(*bytes);
    r->binary = true;
    return true;
  }
  if (key == "priority") {
    int64_t priority;
    DELAYQ_RETURN_IF_ERROR(GetInt(v, field, &priority, "an integer from 0 to 9"));
    // The range is ValidateEnqueue's, as for every store; out of int32 it is out of range too.
    r->priority = priority < 0 || priority > Limits::kMaxPriority ? -1 : static_cast<int32_t>(priority);
    if (r->priority < 0) {
      return Status::InvalidArgument(fmt::format("{} is {}; it must be between 0 (the default) and {} (first)", field,
                                                 priority, Limits::kMaxPriority));
    }
    return true;
  }
  if (key == "group") {
    DELAYQ_RETURN_IF_ERROR(GetString(v, field, &r->group));
    return true;
  }
  if (key == "max_attempts") {
    int64_t n;
    DELAYQ_RETURN_IF_ERROR(GetInt(v, field, &n, "an integer from 1 to 1000"));
    DELAYQ_RETURN_IF_ERROR(ValidateMaxAttempts(n, field));  // before it is narrowed to 32 bits
    r->max_attempts = static_cast<int32_t>(n);
    return true;
  }
  if (key == kTraceParent || key == kTraceState) {
    if (IsNull(v)) return true;
    std::string value;
    DELAYQ_RETURN_IF_ERROR(GetString(v, field, &value));
    DELAYQ_RETURN_IF_ERROR(PutTraceHeader(key, std::move(value), prefix, r));
    return true;
  }
  if (key == "headers") {
    sj::object h;
    if (v.get_object().get(h)) return TypeError(field, "an object of strings");
    for (auto hf : h) {
      std::string_view name;
      if (hf.unescaped_key().get(name)) return TypeError(field, "an object of strings");
      sj::value hv;
      std::string value;
      if (hf.value().get(hv)) return TypeError(field, "an object of strings");
      DELAYQ_RETURN_IF_ERROR(GetString(hv, fmt::format("{}.{}", field, name), &value));
      if (name == kTraceParent || name == kTraceState) {
        DELAYQ_RETURN_IF_ERROR(PutTraceHeader(name, std::move(value), prefix, r));
      } else {
        r->headers[std::string(name)] = std::move(value);
      }
    }
    return true;
  }
  return false;
}

namespace {

void WriteRequestJob(JsonWriter& w, const EnqueueRequest& r) {
  w.BeginObject();
  if (r.binary || !IsJsonValue(r.payload)) {
    w.Key("payload_base64").String(Base64Encode(r.payload));
  } else {
    w.Key("payload").Raw(r.payload);
  }
  WriteWhen(w, r.when);
  if (!r.key.empty()) w.Key("key").String(r.key);
  if (r.replace) w.Key("replace").Bool(true);
  if (r.debounce) w.Key("debounce").Bool(true);
  if (!r.headers.empty()) {
    w.Key("headers").BeginObject();
    for (const auto& [k, v] : r.headers) w.Key(k).String(v);
    w.EndObject();
  }
  if (r.max_attempts) w.Key("max_attempts").Int(*r.max_attempts);
  if (r.key_ttl_ms != 0) w.Key("key_ttl_ms").Int(r.key_ttl_ms);
  if (r.priority != 0) w.Key("priority").Int(r.priority);
  if (!r.group.empty()) w.Key("group").String(r.group);
  w.EndObject();
}

void WriteResult(JsonWriter& w, const EnqueueResult& r) {
  w.BeginObject().Key("id").String(r.id).Key("due_at").Int(r.due_at_ms);
  w.Key("duplicate").Bool(r.duplicate);
  if (r.replaced) w.Key("replaced").Bool(true);
  w.EndObject();
}

constexpr std::string_view kJobFields[] = {"payload",  "payload_base64", "delay_ms",     "delay",       "deliver_at",
                                           "key",      "replace",        "max_attempts", "headers",     "key_ttl_ms",
                                           "debounce", "priority",       "group",        "traceparent", "tracestate"};

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
    auto content = ParseJobContentField(key, v, prefix, &r, &have_payload);
    if (!content.ok()) return content.status();
    if (*content) continue;
    if (key == "key") {
      DELAYQ_RETURN_IF_ERROR(GetString(v, field, &r.key));
    } else if (key == "replace") {
      DELAYQ_RETURN_IF_ERROR(GetBool(v, field, &r.replace));
    } else if (key == "debounce") {
      DELAYQ_RETURN_IF_ERROR(GetBool(v, field, &r.debounce));
    } else if (key == "key_ttl_ms") {
      // Range and the need for a key: ValidateEnqueue, as for every store.
      DELAYQ_RETURN_IF_ERROR(
          GetInt(v, field, &r.key_ttl_ms, "an integer of milliseconds from 0 to 2592000000 (30 days)"));
    } else {
      return UnknownField(prefix, key, kJobFields);
    }
  }
  if (!have_payload) {
    return Status::InvalidArgument(
        fmt::format("{}payload is missing; give \"payload\" (any JSON value) or \"payload_base64\"", prefix));
  }
  return r;
}

}  // namespace

std::string WriteEnqueueRequest(const EnqueueRequest& request) {
  JsonWriter w;
  WriteRequestJob(w, request);
  return w.Take();
}

std::string WriteEnqueueBatchRequest(std::span<const EnqueueRequest> requests) {
  JsonWriter w;
  w.BeginObject().Key("jobs").BeginArray();
  for (const auto& r : requests) WriteRequestJob(w, r);
  w.EndArray().EndObject();
  return w.Take();
}

Result<EnqueueBody> ParseEnqueueRequest(std::string_view body) {
  auto d = OpenRequest(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  // {"jobs": [...]} is a batch, and then "jobs" is its only field; anything else is one job.
  bool batch = false, other = false;
  std::string_view first_other;
  for (auto f : obj) {
    std::string_view key;
    if (f.unescaped_key().get(key)) return Status::InvalidArgument("a field name is not a string");
    if (key == "jobs") {
      batch = true;
    } else if (!other) {
      other = true;
      first_other = key;
    }
  }
  if (batch && other) {
    constexpr std::string_view kBatchFields[] = {"jobs"};
    return Status::InvalidArgument(UnknownField("", first_other, kBatchFields).message() +
                                   "; a batch is {\"jobs\": [...]} and each job's fields go inside its entry");
  }
  if (obj.reset().error()) return Status::InvalidArgument("the body must be a JSON object");
  sj::value jobs;
  auto error = batch ? obj.find_field_unordered("jobs").get(jobs) : simdjson::NO_SUCH_FIELD;
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
        return Status::TooLarge(fmt::format("jobs has more than {} entries; send several batches", Limits::kMaxBatch));
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

std::string WriteEnqueueResponse(const EnqueueResult& result) {
  JsonWriter w;
  WriteResult(w, result);
  return w.Take();
}

std::string WriteEnqueueBatchResponse(std::span<const EnqueueResult> results) {
  JsonWriter w;
  w.BeginObject().Key("jobs").BeginArray();
  for (const auto& r : results) WriteResult(w, r);
  w.EndArray().EndObject();
  return w.Take();
}

Result<std::vector<EnqueueResult>> ParseEnqueueResponse(std::string_view body) {
  auto d = OpenResponse(body, "enqueue");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("enqueue");
  std::vector<EnqueueResult> out;
  auto read_one = [](sj::object r, EnqueueResult* e) {
    for (auto f : r) {
      std::string_view k;
      sj::value v;
      if (f.unescaped_key().get(k) || f.value().get(v)) return;
      if (k == "id") e->id = Str(v);
      else if (k == "due_at") e->due_at_ms = Int(v);
      else if (k == "duplicate") Discard(v.get_bool().get(e->duplicate));
      else if (k == "replaced") Discard(v.get_bool().get(e->replaced));
    }
  };
  sj::value jobs;
  if (!o.find_field_unordered("jobs").get(jobs)) {
    sj::array arr;
    if (jobs.get_array().get(arr)) return Malformed("enqueue");
    for (auto el : arr) {
      sj::object r;
      if (el.get_object().get(r)) return Malformed("enqueue");
      read_one(r, &out.emplace_back());
    }
    return out;
  }
  if (o.reset().error()) return Malformed("enqueue");
  read_one(o, &out.emplace_back());
  return out;
}

}  // namespace delayq::wire
