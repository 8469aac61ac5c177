#include "http/json_responses.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <map>

#include "http/json.h"

namespace delayq::http {
namespace sj = simdjson::ondemand;
namespace {

// Fields the client reads leniently: a missing or odd value keeps the default.
inline void Discard(simdjson::error_code) {}

Status Malformed(std::string_view what) {
  return Status::Internal(fmt::format("the server's answer is not a valid {} response", what));
}

struct Doc {
  simdjson::padded_string text;
  sj::parser parser;
  sj::document doc;
};

Result<std::unique_ptr<Doc>> Open(std::string_view body, std::string_view what) {
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
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' ||
                          raw.back() == '\t')) {
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
  return JobState::kScheduled;
}

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
  }
  return Status::Ok();
}

Status ReadStats(sj::object o, QueueStats* s) {
  for (auto f : o) {
    std::string_view k;
    sj::value v;
    if (f.unescaped_key().get(k) || f.value().get(v)) return Malformed("stats");
    if (k == "name") s->name = Str(v);
    else if (k == "scheduled") s->scheduled = Int(v);
    else if (k == "ready") s->ready = Int(v);
    else if (k == "reserved") s->reserved = Int(v);
    else if (k == "dead") s->dead = Int(v);
    else if (k == "due_next_60s") s->due_next_60s = Int(v);
    else if (k == "earliest_due_at") {
      if (!IsNull(v)) s->earliest_due_at_ms = Int(v);
    } else if (k == "oldest_ready_ms") s->oldest_ready_ms = Int(v);
    else if (k == "paused") Discard(v.get_bool().get(s->paused));
    else if (k == "counters") {
      sj::object c;
      if (v.get_object().get(c)) return Malformed("stats");
      for (auto cf : c) {
        std::string_view ck;
        sj::value cv;
        if (cf.unescaped_key().get(ck) || cf.value().get(cv)) return Malformed("stats");
        auto n = static_cast<uint64_t>(Int(cv));
        if (ck == "enqueued") s->counters.enqueued = n;
        else if (ck == "delivered") s->counters.delivered = n;
        else if (ck == "acked") s->counters.acked = n;
        else if (ck == "nacked") s->counters.nacked = n;
        else if (ck == "redelivered") s->counters.redelivered = n;
        else if (ck == "dead") s->counters.dead = n;
      }
    } else if (k == "lateness_ms") {
      sj::object l;
      if (v.get_object().get(l)) return Malformed("stats");
      for (auto lf : l) {
        std::string_view lk;
        sj::value lv;
        if (lf.unescaped_key().get(lk) || lf.value().get(lv)) return Malformed("stats");
        if (lk == "count") s->lateness.count = static_cast<uint64_t>(Int(lv));
        else if (lk == "p50") s->lateness.p50_ms = Dbl(lv);
        else if (lk == "p90") s->lateness.p90_ms = Dbl(lv);
        else if (lk == "p99") s->lateness.p99_ms = Dbl(lv);
        else if (lk == "p999") s->lateness.p999_ms = Dbl(lv);
        else if (lk == "max") s->lateness.max_ms = Dbl(lv);
      }
    }
  }
  return Status::Ok();
}

// Finds `field` in the top-level object and hands its value to `fn`.
template <class Fn>
Status WithField(std::string_view body, std::string_view what, std::string_view field, Fn fn) {
  auto d = Open(body, what);
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed(what);
  sj::value v;
  if (o.find_field_unordered(field).get(v)) return Malformed(what);
  return fn(v);
}

}  // namespace

Status ParseErrorResponse(int http_status, std::string_view body) {
  auto d = Open(body, "error");
  if (d.ok()) {
    sj::object o;
    sj::value e;
    sj::object eo;
    if (!(*d)->doc.get_object().get(o) && !o.find_field_unordered("error").get(e) &&
        !e.get_object().get(eo)) {
      std::string code, message;
      for (auto f : eo) {
        std::string_view k;
        sj::value v;
        if (f.unescaped_key().get(k) || f.value().get(v)) break;
        if (k == "code") code = Str(v);
        else if (k == "message") message = Str(v);
      }
      Code c = CodeFromName(code);
      if (c == Code::kInternal && code != "internal") {  // a transport code, e.g. method_not_allowed
        c = http_status == 401 ? Code::kUnauthenticated
            : http_status == 404 ? Code::kNotFound
            : http_status == 413 || http_status == 431 ? Code::kTooLarge
            : http_status == 429 ? Code::kResourceExhausted
            : http_status == 503 ? Code::kUnavailable
            : http_status >= 400 && http_status < 500 ? Code::kInvalidArgument
                                                      : Code::kInternal;
      }
      return Status(c, message.empty() ? fmt::format("HTTP {}", http_status) : message);
    }
  }
  return Status(http_status == 503 ? Code::kUnavailable : Code::kInternal,
                fmt::format("HTTP {}: {}", http_status, body.substr(0, 200)));
}

Result<std::vector<EnqueueResult>> ParseEnqueueResponse(std::string_view body) {
  auto d = Open(body, "enqueue");
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

Result<Job> ParseJobResponse(std::string_view body) {
  auto d = Open(body, "job");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("job");
  Job j;
  DELAYQ_RETURN_IF_ERROR(ReadJob(o, &j));
  return j;
}

Result<std::vector<Job>> ParseJobListResponse(std::string_view body) {
  std::vector<Job> out;
  Status s = WithField(body, "job list", "jobs", [&](sj::value v) {
    sj::array arr;
    if (v.get_array().get(arr)) return Malformed("job list");
    for (auto el : arr) {
      sj::object o;
      if (el.get_object().get(o)) return Malformed("job list");
      DELAYQ_RETURN_IF_ERROR(ReadJob(o, &out.emplace_back()));
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<Delivery>> ParseReserveResponse(std::string_view body) {
  std::vector<Delivery> out;
  Status s = WithField(body, "reserve", "jobs", [&](sj::value v) {
    sj::array arr;
    if (v.get_array().get(arr)) return Malformed("reserve");
    for (auto el : arr) {
      sj::object o;
      if (el.get_object().get(o)) return Malformed("reserve");
      Delivery& d = out.emplace_back();
      for (auto f : o) {
        std::string_view k;
        sj::value fv;
        if (f.unescaped_key().get(k) || f.value().get(fv)) return Malformed("reserve");
        if (k == "id") d.id = Str(fv);
        else if (k == "receipt") d.receipt = Str(fv);
        else if (k == "payload") d.payload = Raw(fv);
        else if (k == "payload_base64") {
          d.payload = Base64Decode(Str(fv)).value_or("");
          d.binary = true;
        } else if (k == "headers") d.headers = ReadHeaders(fv);
        else if (k == "attempt") d.attempt = static_cast<int32_t>(Int(fv));
        else if (k == "max_attempts") d.max_attempts = static_cast<int32_t>(Int(fv));
        else if (k == "due_at") d.due_at_ms = Int(fv);
        else if (k == "key") d.key = IsNull(fv) ? "" : Str(fv);
        else if (k == "lease_deadline") d.lease_deadline_ms = Int(fv);
      }
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<QueueStats> ParseStatsResponse(std::string_view body) {
  auto d = Open(body, "stats");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("stats");
  QueueStats s;
  DELAYQ_RETURN_IF_ERROR(ReadStats(o, &s));
  return s;
}

Result<std::vector<QueueStats>> ParseQueuesResponse(std::string_view body) {
  std::vector<QueueStats> out;
  Status s = WithField(body, "queue list", "queues", [&](sj::value v) {
    sj::array arr;
    if (v.get_array().get(arr)) return Malformed("queue list");
    for (auto el : arr) {
      sj::object o;
      if (el.get_object().get(o)) return Malformed("queue list");
      DELAYQ_RETURN_IF_ERROR(ReadStats(o, &out.emplace_back()));
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<NackResult> ParseNackResponse(std::string_view body) {
  auto d = Open(body, "nack");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("nack");
  NackResult r;
  for (auto f : o) {
    std::string_view k;
    sj::value v;
    if (f.unescaped_key().get(k) || f.value().get(v)) return Malformed("nack");
    if (k == "state") r.state = StateOf(Str(v));
    else if (k == "due_at") r.due_at_ms = Int(v);
  }
  return r;
}

Result<TouchResult> ParseTouchResponse(std::string_view body) {
  TouchResult r;
  Status s = WithField(body, "touch", "lease_deadline", [&](sj::value v) {
    r.lease_deadline_ms = Int(v);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return r;
}

Result<std::vector<Status>> ParseBatchResponse(std::string_view body,
                                               const std::vector<std::string>& receipts) {
  std::map<std::string, Status> failed;
  Status s = WithField(body, "batch", "failed", [&](sj::value v) {
    sj::array arr;
    if (v.get_array().get(arr)) return Malformed("batch");
    for (auto el : arr) {
      sj::object o;
      if (el.get_object().get(o)) return Malformed("batch");
      std::string receipt, code, message;
      for (auto f : o) {
        std::string_view k;
        sj::value fv;
        if (f.unescaped_key().get(k) || f.value().get(fv)) return Malformed("batch");
        if (k == "receipt") receipt = Str(fv);
        else if (k == "code") code = Str(fv);
        else if (k == "message") message = Str(fv);
      }
      failed.emplace(receipt, Status(CodeFromName(code), message));
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  std::vector<Status> out;
  for (const auto& r : receipts) {
    auto it = failed.find(r);
    out.push_back(it == failed.end() ? Status::Ok() : it->second);
  }
  return out;
}

Result<ScheduleHistogram> ParseScheduleResponse(std::string_view body) {
  auto d = Open(body, "schedule");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("schedule");
  ScheduleHistogram h;
  for (auto f : o) {
    std::string_view k;
    sj::value v;
    if (f.unescaped_key().get(k) || f.value().get(v)) return Malformed("schedule");
    if (k == "start") h.start_ms = Int(v);
    else if (k == "bucket_ms") h.bucket_ms = Int(v);
    else if (k == "later") h.later = Int(v);
    else if (k == "buckets") {
      sj::array arr;
      if (v.get_array().get(arr)) return Malformed("schedule");
      for (auto el : arr) {
        int64_t n = 0;
        Discard(el.get_int64().get(n));
        h.buckets.push_back(n);
      }
    }
  }
  return h;
}

Result<int64_t> ParseCountResponse(std::string_view body, std::string_view field) {
  int64_t n = 0;
  Status s = WithField(body, "count", field, [&](sj::value v) {
    n = Int(v);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return n;
}

}  // namespace delayq::http
