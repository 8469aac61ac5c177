#include "wire/queue.h"

#include <fmt/format.h>

#include <climits>

#include "core/validate.h"
#include "wire/json_read.h"
#include "wire/json_writer.h"

namespace delayq::wire {
namespace {

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
    else if (k == "completed") s->completed = Int(v);
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
    } else if (k == "lateness_ms" || k == "limit_wait_ms") {
      LatenessSummary& summary = k == "lateness_ms" ? s->lateness : s->limit_wait;
      sj::object l;
      if (v.get_object().get(l)) return Malformed("stats");
      for (auto lf : l) {
        std::string_view lk;
        sj::value lv;
        if (lf.unescaped_key().get(lk) || lf.value().get(lv)) return Malformed("stats");
        if (lk == "count") summary.count = static_cast<uint64_t>(Int(lv));
        else if (lk == "p50") summary.p50_ms = Dbl(lv);
        else if (lk == "p90") summary.p90_ms = Dbl(lv);
        else if (lk == "p99") summary.p99_ms = Dbl(lv);
        else if (lk == "p999") summary.p999_ms = Dbl(lv);
        else if (lk == "max") summary.max_ms = Dbl(lv);
      }
    } else if (k == "groups") {
      sj::array arr;
      if (v.get_array().get(arr)) return Malformed("stats");
      for (auto el : arr) {
        sj::object g;
        if (el.get_object().get(g)) return Malformed("stats");
        QueueStats::Group& group = s->groups.emplace_back();
        for (auto gf : g) {
          std::string_view gk;
          sj::value gv;
          if (gf.unescaped_key().get(gk) || gf.value().get(gv)) return Malformed("stats");
          if (gk == "group") group.group = IsNull(gv) ? "" : Str(gv);
          else if (gk == "ready") group.ready = Int(gv);
          else if (gk == "reserved") group.reserved = Int(gv);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

// {"count", "p50", "p90", "p99", "p999", "max", "buckets": [{"le", "count"}...]} under `key`.
void WriteSummary(JsonWriter& w, std::string_view key, const LatenessSummary& l) {
  w.Key(key).BeginObject();
  w.Key("count").Uint(l.count);
  w.Key("p50").Double(l.p50_ms);
  w.Key("p90").Double(l.p90_ms);
  w.Key("p99").Double(l.p99_ms);
  w.Key("p999").Double(l.p999_ms);
  w.Key("max").Double(l.max_ms);
  w.Key("buckets").BeginArray();  // cumulative counts at each upper edge (ms)
  for (size_t i = 0; i < l.cumulative.size(); ++i) {
    w.BeginObject().Key("le").Double(LatenessSummary::kLatenessBucketsMs[i]);
    w.Key("count").Uint(l.cumulative[i]).EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WriteStats(JsonWriter& w, const QueueStats& s) {
  w.BeginObject();
  w.Key("name").String(s.name);
  w.Key("scheduled").Int(s.scheduled);
  w.Key("ready").Int(s.ready);
  w.Key("reserved").Int(s.reserved);
  w.Key("dead").Int(s.dead);
  w.Key("completed").Int(s.completed);
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
  WriteSummary(w, "lateness_ms", s.lateness);
  WriteSummary(w, "limit_wait_ms", s.limit_wait);
  // The top groups by ready jobs (the default group's name is null); [] when no job has a group.
  w.Key("groups").BeginArray();
  for (const auto& g : s.groups) {
    w.BeginObject().Key("group");
    if (g.group.empty()) {
      w.Null();
    } else {
      w.String(g.group);
    }
    w.Key("ready").Int(g.ready).Key("reserved").Int(g.reserved).EndObject();
  }
  w.EndArray();
  w.EndObject();
}

std::string WriteStatsResponse(const QueueStats& stats) {
  JsonWriter w;
  WriteStats(w, stats);
  return w.Take();
}

std::string WriteQueuesResponse(std::span<const QueueStats> queues) {
  JsonWriter w;
  w.BeginObject().Key("queues").BeginArray();
  for (const auto& q : queues) WriteStats(w, q);
  w.EndArray().EndObject();
  return w.Take();
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
  w.Key("rate_per_s").Double(c.rate_per_s);
  w.Key("burst").Int(c.burst);
  w.Key("max_reserved").Int(c.max_reserved);
  w.Key("group_max_reserved").Int(c.group_max_reserved);
  w.Key("priority_aging_ms").Int(c.priority_aging_ms);
  w.Key("keep_completed_ms").Int(c.keep_completed_ms);
  w.EndObject();
}

std::string WriteConfigBody(const QueueConfig& config) {
  JsonWriter w;
  WriteConfig(w, config);
  return w.Take();
}

namespace {

// A number field of a config object: its name, the member it reads into, and (for an integer)
// what its value must be. A table, so that a field is added in one line and listed in the "did
// you mean" of an unknown one.
template <typename T>
struct NumberField {
  std::string_view name;
  int64_t T::*whole = nullptr;
  double T::*real = nullptr;
  std::string_view what = "a number";
};

constexpr NumberField<QueueConfig> kConfigFields[] = {
    {"lease_ms", &QueueConfig::lease_ms, nullptr, "an integer number of milliseconds"},
    {"max_payload", &QueueConfig::max_payload, nullptr, "an integer number of bytes"},
    {"dead_retention_ms", &QueueConfig::dead_retention_ms, nullptr, "an integer number of milliseconds"},
    {"max_delay_ms", &QueueConfig::max_delay_ms, nullptr, "an integer number of milliseconds"},
    {"rate_per_s", nullptr, &QueueConfig::rate_per_s},
    {"burst", &QueueConfig::burst, nullptr, "an integer number of jobs"},
    {"max_reserved", &QueueConfig::max_reserved, nullptr, "an integer number of jobs"},
    {"group_max_reserved", &QueueConfig::group_max_reserved, nullptr, "an integer number of jobs"},
    {"priority_aging_ms", &QueueConfig::priority_aging_ms, nullptr, "an integer number of milliseconds"},
    {"keep_completed_ms", &QueueConfig::keep_completed_ms, nullptr, "an integer number of milliseconds"},
};
constexpr NumberField<BackoffPolicy> kBackoffFields[] = {
    {"base_ms", &BackoffPolicy::base_ms, nullptr, "an integer number of milliseconds"},
    {"max_ms", &BackoffPolicy::max_ms, nullptr, "an integer number of milliseconds"},
    {"factor", nullptr, &BackoffPolicy::factor},
    {"jitter", nullptr, &BackoffPolicy::jitter},
};

// Reads `v` into the table's field named `key` of *out; false when the table has no such field.
template <typename T, size_t N>
Result<bool> ReadNumberField(const NumberField<T> (&table)[N], std::string_view key, sj::value v,
                             std::string_view field, T* out) {
  for (const NumberField<T>& f : table) {
    if (f.name != key) continue;
    if (f.whole) {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, field, &(out->*f.whole), f.what));
    } else if (v.get_double().get(out->*f.real)) {
      return TypeError(field, f.what);
    }
    return true;
  }
  return false;
}

template <typename T, size_t N>
std::vector<std::string_view> NamesOf(const NumberField<T> (&table)[N], std::initializer_list<std::string_view> more) {
  std::vector<std::string_view> names(more);
  for (const NumberField<T>& f : table) names.push_back(f.name);
  return names;
}

Status ParseBackoff(sj::value v, Fields fields, BackoffPolicy* backoff) {
  sj::object b;
  if (v.get_object().get(b)) return TypeError("backoff", "an object");
  for (auto bf : b) {
    std::string_view bkey;
    sj::value bv;
    if (bf.unescaped_key().get(bkey) || bf.value().get(bv)) return Status::InvalidArgument("malformed field");
    auto known = ReadNumberField(kBackoffFields, bkey, bv, fmt::format("backoff.{}", bkey), backoff);
    if (!known.ok()) return known.status();
    if (!*known && fields == Fields::kClosed) return UnknownField("backoff.", bkey, NamesOf(kBackoffFields, {}));
  }
  return Status::Ok();
}

}  // namespace

Result<QueueConfig> ParseConfig(std::string_view body, const QueueConfig& base, Fields fields) {
  auto d = OpenRequest(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  QueueConfig c = base;
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    if (key == "max_attempts") {
      int64_t n;
      DELAYQ_RETURN_IF_ERROR(GetInt(v, key, &n, "an integer"));
      DELAYQ_RETURN_IF_ERROR(ValidateMaxAttempts(n));  // before it is narrowed to 32 bits
      c.max_attempts = static_cast<int32_t>(n);
    } else if (key == "backoff") {
      DELAYQ_RETURN_IF_ERROR(ParseBackoff(v, fields, &c.backoff));
    } else {
      auto known = ReadNumberField(kConfigFields, key, v, key, &c);
      if (!known.ok()) return known.status();
      if (!*known && fields == Fields::kClosed) {
        return UnknownField("", key, NamesOf(kConfigFields, {"max_attempts", "backoff"}));
      }
    }
  }
  return c;
}

std::string WriteScheduleResponse(const ScheduleHistogram& h) {
  JsonWriter w;
  w.BeginObject().Key("start").Int(h.start_ms).Key("bucket_ms").Int(h.bucket_ms);
  w.Key("buckets").BeginArray();
  for (int64_t c : h.buckets) w.Int(c);
  w.EndArray().Key("later").Int(h.later).EndObject();
  return w.Take();
}

std::string WriteReplayRequest(std::span<const std::string> ids) {
  JsonWriter w;
  w.BeginObject();
  if (!ids.empty()) {
    w.Key("ids").BeginArray();
    for (const auto& id : ids) w.String(id);
    w.EndArray();
  }
  w.EndObject();
  return w.Take();
}

Result<std::vector<std::string>> ParseReplayRequest(std::string_view body) {
  std::vector<std::string> ids;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return ids;
  auto d = OpenRequest(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    constexpr std::string_view kFields[] = {"ids"};
    if (key != "ids") return UnknownField("", key, kFields);
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

std::string WriteCountResponse(std::string_view field, int64_t n) {
  JsonWriter w;
  w.BeginObject().Key(field).Int(n).EndObject();
  return w.Take();
}

Result<QueueStats> ParseStatsResponse(std::string_view body) {
  auto d = OpenResponse(body, "stats");
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

Result<ScheduleHistogram> ParseScheduleResponse(std::string_view body) {
  auto d = OpenResponse(body, "schedule");
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

}  // namespace delayq::wire
