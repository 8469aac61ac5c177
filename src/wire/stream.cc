#include "wire/stream.h"

#include <fmt/format.h>

#include "core/validate.h"
#include "wire/error.h"
#include "wire/json_read.h"
#include "wire/json_writer.h"
#include "wire/reserve.h"

namespace delayq::wire {

std::string WriteStreamRequest(const StreamRequest& request) {
  JsonWriter w;
  w.BeginObject().Key("max_in_flight").Int(request.max_in_flight);
  if (request.lease_ms) w.Key("lease_ms").Int(*request.lease_ms);
  if (request.max_bytes != Limits::kDefaultReserveBytes) w.Key("max_bytes").Int(request.max_bytes);
  w.EndObject();
  return w.Take();
}

Result<StreamRequest> ParseStreamRequest(std::string_view body) {
  StreamRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;  // all defaults
  auto d = OpenRequest(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  ReserveRequest checked;  // the reserve's rules for what the two share
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    int64_t n;
    if (key == "max_in_flight") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "max_in_flight", &n, "an integer from 1 to 1000"));
      if (n < 1 || n > Limits::kMaxReserve) {
        return Status::InvalidArgument(
            fmt::format("max_in_flight is {}; it must be between 1 and {}", n, Limits::kMaxReserve));
      }
      r.max_in_flight = static_cast<int32_t>(n);
    } else if (key == "lease_ms") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "lease_ms", &n, "an integer from 1000 to 43200000"));
      r.lease_ms = checked.lease_ms = n;
    } else if (key == "max_bytes") {
      DELAYQ_RETURN_IF_ERROR(GetInt(v, "max_bytes", &n, "an integer from 1 to 268435456"));
      r.max_bytes = checked.max_bytes = n;
    } else {
      constexpr std::string_view kFields[] = {"max_in_flight", "lease_ms", "max_bytes"};
      return UnknownField("", key, kFields);
    }
  }
  DELAYQ_RETURN_IF_ERROR(ValidateReserve(checked));
  return r;
}

std::string WriteStreamDelivery(const Delivery& d) {
  JsonWriter w;
  WriteDelivery(w, d);
  std::string line = w.Take();
  line += '\n';
  return line;
}

std::string WriteStreamHeartbeat(int64_t now_ms) {
  JsonWriter w;
  w.BeginObject().Key("heartbeat").Int(now_ms).EndObject();
  std::string line = w.Take();
  line += '\n';
  return line;
}

Result<StreamLine> ParseStreamLine(std::string_view line) {
  auto d = OpenResponse(line, "stream");
  if (!d.ok()) return d.status();
  sj::object o;
  if ((*d)->doc.get_object().get(o)) return Malformed("stream");
  sj::value beat;
  if (!o.find_field_unordered("heartbeat").get(beat)) return StreamLine(Int(beat));
  bool rewound;
  if (o.reset().get(rewound)) return Malformed("stream");
  sj::value error;
  if (!o.find_field_unordered("error").get(error)) return ParseErrorResponse(503, line);
  if (o.reset().get(rewound)) return Malformed("stream");
  Delivery delivery;
  DELAYQ_RETURN_IF_ERROR(ReadDelivery(o, delivery, "stream"));
  return StreamLine(std::move(delivery));
}

}  // namespace delayq::wire
