#include "wire/schedule.h"

#include <fmt/format.h>

#include "core/duration.h"
#include "wire/job.h"
#include "wire/job_content.h"
#include "wire/json_read.h"
#include "wire/json_writer.h"

namespace delayq::wire {
namespace {

constexpr std::string_view kSpecFields[] = {"cron",     "every",   "timezone",    "payload",   "payload_base64",
                                            "headers",  "misfire", "start_at",    "end_at",    "max_attempts",
                                            "priority", "group",   "traceparent", "tracestate"};

// Epoch ms or an RFC 3339 string.
Status GetTimestamp(sj::value v, std::string_view field, int64_t* out) {
  sj::json_type type;
  if (v.type().get(type)) return TypeError(field, "epoch milliseconds or an RFC 3339 string");
  if (type == sj::json_type::number) return GetInt(v, field, out, "epoch milliseconds or an RFC 3339 string");
  std::string text;
  if (type != sj::json_type::string || !GetString(v, field, &text).ok()) {
    return TypeError(field, "epoch milliseconds or an RFC 3339 string");
  }
  auto parsed = ParseTimestamp(text);
  if (!parsed.ok()) return Status::InvalidArgument(fmt::format("{}: {}", field, parsed.status().message()));
  *out = *parsed;
  return Status::Ok();
}

void WriteSpecFields(JsonWriter& w, const ScheduleSpec& s) {
  if (!s.cron.empty()) w.Key("cron").String(s.cron);
  if (s.every_ms > 0) w.Key("every").String(FormatDuration(s.every_ms));
  w.Key("timezone").String(s.timezone);
  WritePayload(w, s.payload, s.binary);
  WriteHeaders(w, s.headers);
  if (s.max_attempts) w.Key("max_attempts").Int(*s.max_attempts);
  if (s.priority != 0) w.Key("priority").Int(s.priority);
  if (!s.group.empty()) w.Key("group").String(s.group);
  w.Key("misfire").String(MisfireName(s.misfire));
  if (s.start_at_ms) w.Key("start_at").Int(*s.start_at_ms);
  if (s.end_at_ms) w.Key("end_at").Int(*s.end_at_ms);
}

void WriteOne(JsonWriter& w, const RecurringSchedule& s) {
  w.BeginObject();
  w.Key("name").String(s.spec.name);
  w.Key("queue").String(s.queue);
  WriteSpecFields(w, s.spec);
  w.Key("paused").Bool(s.paused);
  w.Key("next_runs").BeginArray();
  for (int64_t at : s.next_runs) w.Int(at);
  w.EndArray();
  if (s.last_run_at_ms) {
    w.Key("last_run_at").Int(*s.last_run_at_ms);
  } else {
    w.Key("last_run_at").Null();
  }
  w.Key("created_at").Int(s.created_at_ms);
  w.Key("updated_at").Int(s.updated_at_ms);
  w.EndObject();
}

Status ReadOne(sj::object o, RecurringSchedule* s) {
  for (auto f : o) {
    std::string_view k;
    sj::value v;
    if (f.unescaped_key().get(k) || f.value().get(v)) return Malformed("schedule");
    if (k == "name") s->spec.name = Str(v);
    else if (k == "queue") s->queue = Str(v);
    else if (k == "cron") s->spec.cron = Str(v);
    else if (k == "every") {
      auto ms = ParseDuration(Str(v));
      s->spec.every_ms = ms.ok() ? *ms : 0;
    } else if (k == "timezone") s->spec.timezone = Str(v);
    else if (k == "payload") s->spec.payload = Raw(v);
    else if (k == "payload_base64") {
      s->spec.payload = Base64Decode(Str(v)).value_or("");
      s->spec.binary = true;
    } else if (k == "headers") s->spec.headers = ReadHeaders(v);
    else if (k == "max_attempts") s->spec.max_attempts = static_cast<int32_t>(Int(v));
    else if (k == "priority") s->spec.priority = static_cast<int32_t>(Int(v));
    else if (k == "group") s->spec.group = Str(v);
    else if (k == "misfire") s->spec.misfire = ParseMisfire(Str(v)).value_or(Misfire::kRunOnce);
    else if (k == "start_at") s->spec.start_at_ms = Int(v);
    else if (k == "end_at") s->spec.end_at_ms = Int(v);
    else if (k == "paused") Discard(v.get_bool().get(s->paused));
    else if (k == "next_runs") {
      sj::array a;
      if (v.get_array().get(a)) return Malformed("schedule");
      for (auto item : a) {
        sj::value at;
        if (!item.get(at)) s->next_runs.push_back(Int(at));
      }
    } else if (k == "last_run_at") {
      if (!IsNull(v)) s->last_run_at_ms = Int(v);
    } else if (k == "created_at") s->created_at_ms = Int(v);
    else if (k == "updated_at") s->updated_at_ms = Int(v);
  }
  return Status::Ok();
}

}  // namespace

Result<ScheduleSpec> ParseScheduleSpec(std::string_view body, std::string_view name) {
  auto d = OpenRequest(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  ScheduleSpec spec;
  spec.name = std::string(name);
  EnqueueRequest content;  // payload, headers, max_attempts, priority, group: read as a job's
  bool have_payload = false;
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    auto shared = ParseJobContentField(key, v, "", &content, &have_payload);
    if (!shared.ok()) return shared.status();
    if (*shared) continue;
    if (key == "cron") {
      DELAYQ_RETURN_IF_ERROR(GetString(v, key, &spec.cron));
      if (spec.cron.empty()) return Status::InvalidArgument("cron is empty; write 5 fields, e.g. \"*/5 * * * *\"");
    } else if (key == "every") {
      sj::json_type type;
      if (v.type().get(type)) return TypeError(key, "a duration such as \"90s\", or milliseconds");
      if (type == sj::json_type::number) {
        DELAYQ_RETURN_IF_ERROR(GetInt(v, key, &spec.every_ms, "a duration such as \"90s\", or milliseconds"));
      } else {
        std::string text;
        DELAYQ_RETURN_IF_ERROR(GetString(v, key, &text));
        auto ms = ParseDuration(text);
        if (!ms.ok()) return Status::InvalidArgument(fmt::format("every: {}", ms.status().message()));
        spec.every_ms = *ms;
      }
      if (spec.every_ms <= 0) {
        return Status::InvalidArgument("every is 0; it must be a period of 1s to 366d");
      }
    } else if (key == "timezone") {
      DELAYQ_RETURN_IF_ERROR(GetString(v, key, &spec.timezone));
    } else if (key == "misfire") {
      std::string text;
      DELAYQ_RETURN_IF_ERROR(GetString(v, key, &text));
      auto misfire = ParseMisfire(text);
      if (!misfire) {
        return Status::InvalidArgument(
            fmt::format(R"(misfire "{}" is not one of "skip", "run_once", "run_all")", text.substr(0, 80)));
      }
      spec.misfire = *misfire;
    } else if (key == "start_at") {
      int64_t at;
      DELAYQ_RETURN_IF_ERROR(GetTimestamp(v, key, &at));
      spec.start_at_ms = at;
    } else if (key == "end_at") {
      int64_t at;
      DELAYQ_RETURN_IF_ERROR(GetTimestamp(v, key, &at));
      spec.end_at_ms = at;
    } else {
      return UnknownField("", key, kSpecFields);
    }
  }
  if (have_payload) {
    spec.payload = std::move(content.payload);
    spec.binary = content.binary;
  }
  spec.headers = std::move(content.headers);
  spec.max_attempts = content.max_attempts;
  spec.priority = content.priority;
  spec.group = std::move(content.group);
  return spec;
}

std::string WriteScheduleSpec(const ScheduleSpec& spec) {
  JsonWriter w;
  w.BeginObject();
  WriteSpecFields(w, spec);
  w.EndObject();
  return w.Take();
}

std::string WriteSchedule(const RecurringSchedule& schedule) {
  JsonWriter w;
  WriteOne(w, schedule);
  return w.Take();
}

std::string WriteSchedules(std::span<const RecurringSchedule> schedules) {
  JsonWriter w;
  w.BeginObject().Key("schedules").BeginArray();
  for (const auto& s : schedules) WriteOne(w, s);
  w.EndArray().EndObject();
  return w.Take();
}

Result<RecurringSchedule> ParseSchedule(std::string_view body) {
  auto d = OpenResponse(body, "schedule");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("schedule");
  RecurringSchedule s;
  DELAYQ_RETURN_IF_ERROR(ReadOne(o, &s));
  return s;
}

Result<std::vector<RecurringSchedule>> ParseSchedules(std::string_view body) {
  std::vector<RecurringSchedule> out;
  Status st = WithField(body, "schedule list", "schedules", [&](sj::value v) -> Status {
    sj::array a;
    if (v.get_array().get(a)) return Malformed("schedule list");
    for (auto item : a) {
      sj::object o;
      if (item.get_object().get(o)) return Malformed("schedule list");
      RecurringSchedule s;
      DELAYQ_RETURN_IF_ERROR(ReadOne(o, &s));
      out.push_back(std::move(s));
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace delayq::wire
