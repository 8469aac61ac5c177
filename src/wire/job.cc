#include <fmt/format.h>

#include "wire/job.h"

#include "core/trace_context.h"
#include "wire/json_read.h"

namespace delayq::wire {
namespace {

Status ReadJob(sj::object o, Job* j) {
  for (auto f : o) {
    std::string_view k;
    sj::value v;
    if (f.unescaped_key().get(k) || f.value().get(v)) return Malformed("job");
    if (k == "id") j->id = Str(v);
    else if (k == "queue") j->queue = Str(v);
    else if (k == "state") j->state = StateOf(Str(v));
    else if (k == "due_at") j->due_at_ms = Int(v);
    else if (k == "attempt") j->attempt = static_cast<int32_t>(Int(v));
    else if (k == "max_attempts") j->max_attempts = static_cast<int32_t>(Int(v));
    else if (k == "key") j->key = IsNull(v) ? "" : Str(v);
    else if (k == "payload") j->payload = Raw(v);
    else if (k == "payload_base64") {
      j->payload = Base64Decode(Str(v)).value_or("");
      j->binary = true;
    } else if (k == "headers") j->headers = ReadHeaders(v);
    else if (k == "created_at") j->created_at_ms = Int(v);
    else if (k == "last_error") j->last_error = IsNull(v) ? "" : Str(v);
    else if (k == "lease_deadline") j->lease_deadline_ms = Int(v);
    else if (k == "dead_at") j->dead_at_ms = Int(v);
    else if (k == "priority") j->priority = static_cast<int32_t>(Int(v));
    else if (k == "group") j->group = IsNull(v) ? "" : Str(v);
    else if (k == "progress") j->progress = IsNull(v) ? "" : Raw(v);
    else if (k == "completed_at") j->completed_at_ms = Int(v);
    else if (k == "result") j->result = IsNull(v) ? "" : Raw(v);
  }
  return Status::Ok();
}

}  // namespace

void WritePayload(JsonWriter& w, std::string_view payload, bool binary) {
  if (!binary && IsJsonValue(payload)) {
    w.Key("payload").Raw(payload);
  } else {
    w.Key("payload_base64").String(Base64Encode(payload));
  }
}

void WriteHeaders(JsonWriter& w, const Headers& headers) {
  w.Key("headers").BeginObject();
  for (const auto& [k, v] : headers) w.Key(k).String(v);
  w.EndObject();
}

void WriteTraceContext(JsonWriter& w, const Headers& headers, bool nulls) {
  if (headers.empty() && !nulls) return;
  for (std::string_view name : {kTraceParent, kTraceState}) {
    const auto it = headers.find(std::string(name));
    if (it != headers.end()) {
      w.Key(name).String(it->second);
    } else if (nulls) {
      w.Key(name).Null();
    }
  }
}

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
  if (j.state == JobState::kCompleted) w.Key("completed_at").Int(j.completed_at_ms);
  w.Key("priority").Int(j.priority);
  if (j.group.empty()) {
    w.Key("group").Null();
  } else {
    w.Key("group").String(j.group);
  }
  WriteTraceContext(w, j.headers, true);
  // Stores keep only checked JSON (ValidateTouch); a value that is not JSON after all shows as none
  // rather than breaking the answer.
  if (j.progress.empty() || !IsJsonValue(j.progress)) {
    w.Key("progress").Null();
  } else {
    w.Key("progress").Raw(j.progress);
  }
  // The same for a completed job's result (AckRequest::result).
  if (j.result.empty() || !IsJsonValue(j.result)) {
    w.Key("result").Null();
  } else {
    w.Key("result").Raw(j.result);
  }
  w.EndObject();
}

std::string WriteJobResponse(const Job& job) {
  JsonWriter w;
  WriteJob(w, job);
  return w.Take();
}

std::string WriteJobPageResponse(const JobPage& page) {
  JsonWriter w;
  w.BeginObject().Key("jobs").BeginArray();
  for (const auto& j : page.jobs) WriteJob(w, j);
  w.EndArray().Key("next_cursor");
  if (page.next_cursor.empty()) {
    w.Null();
  } else {
    w.String(page.next_cursor);
  }
  w.EndObject();
  return w.Take();
}

Result<Job> ParseJobResponse(std::string_view body) {
  auto d = OpenResponse(body, "job");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("job");
  Job j;
  DELAYQ_RETURN_IF_ERROR(ReadJob(o, &j));
  return j;
}

Result<JobPage> ParseJobPageResponse(std::string_view body) {
  auto d = OpenResponse(body, "job page");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("job page");
  JobPage page;
  sj::value jobs;
  if (o.find_field_unordered("jobs").get(jobs)) return Malformed("job page");
  sj::array arr;
  if (jobs.get_array().get(arr)) return Malformed("job page");
  for (auto el : arr) {
    sj::object j;
    if (el.get_object().get(j)) return Malformed("job page");
    DELAYQ_RETURN_IF_ERROR(ReadJob(j, &page.jobs.emplace_back()));
  }
  sj::value next;
  if (!o.find_field_unordered("next_cursor").get(next) && !IsNull(next)) page.next_cursor = Str(next);
  return page;
}

}  // namespace delayq::wire
