#include "wire/reserve.h"

#include <fmt/format.h>

#include "core/validate.h"
#include "wire/job.h"
#include "wire/json_read.h"
#include "wire/json_writer.h"

namespace delayq::wire {

std::string WriteReserveRequest(const ReserveRequest& request) {
  JsonWriter w;
  w.BeginObject().Key("max").Int(request.max).Key("wait_ms").Int(request.wait_ms);
  if (request.lease_ms) w.Key("lease_ms").Int(*request.lease_ms);
  if (request.max_bytes != Limits::kDefaultReserveBytes) w.Key("max_bytes").Int(request.max_bytes);
  w.EndObject();
  return w.Take();
}

Result<ReserveRequest> ParseReserveRequest(std::string_view body) {
  ReserveRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;  // all defaults
  auto d = OpenRequest(body);
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
      DELAYQ_RETURN_IF_ERROR(ValidateReserveMax(n));  // before it is narrowed to 32 bits
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
    } else {
      constexpr std::string_view kFields[] = {"max", "wait_ms", "lease_ms", "max_bytes"};
      return UnknownField("", key, kFields);
    }
  }
  DELAYQ_RETURN_IF_ERROR(ValidateReserve(r));
  return r;
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
  // Only when the job has them, so a plain delivery stays as it was.
  if (d.priority != 0) w.Key("priority").Int(d.priority);
  if (!d.group.empty()) w.Key("group").String(d.group);
  WriteTraceContext(w, d.headers, false);
  w.EndObject();
}

std::string WriteReserveResponse(std::span<const Delivery> deliveries) {
  JsonWriter w;
  w.BeginObject().Key("jobs").BeginArray();
  for (const auto& d : deliveries) WriteDelivery(w, d);
  w.EndArray().EndObject();
  return w.Take();
}

Status ReadDelivery(sj::object o, Delivery& d, std::string_view what) {
  for (auto f : o) {
    std::string_view k;
    sj::value fv;
    if (f.unescaped_key().get(k) || f.value().get(fv)) return Malformed(what);
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
    else if (k == "priority") d.priority = static_cast<int32_t>(Int(fv));
    else if (k == "group") d.group = Str(fv);
  }
  return Status::Ok();
}

Result<std::vector<Delivery>> ParseReserveResponse(std::string_view body) {
  std::vector<Delivery> out;
  Status s = WithField(body, "reserve", "jobs", [&](sj::value v) {
    sj::array arr;
    if (v.get_array().get(arr)) return Malformed("reserve");
    for (auto el : arr) {
      sj::object o;
      if (el.get_object().get(o)) return Malformed("reserve");
      DELAYQ_RETURN_IF_ERROR(ReadDelivery(o, out.emplace_back(), "reserve"));
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace delayq::wire
