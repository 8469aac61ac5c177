#include "wire/when.h"

#include <fmt/format.h>

#include "core/duration.h"
#include "core/validate.h"

namespace delayq::wire {

void WriteWhen(JsonWriter& w, const When& when) {
  if (when.delay_ms) w.Key("delay_ms").Int(*when.delay_ms);
  if (when.deliver_at_ms) w.Key("deliver_at").Int(*when.deliver_at_ms);
}

namespace {

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

}  // namespace

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

std::string WriteRescheduleRequest(const When& when) {
  JsonWriter w;
  w.BeginObject();
  WriteWhen(w, when);
  w.EndObject();
  return w.Take();
}

Result<When> ParseRescheduleRequest(std::string_view body) {
  auto d = OpenRequest(body);
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
    constexpr std::string_view kFields[] = {"delay_ms", "delay", "deliver_at"};
    if (!*r) return UnknownField("", key, kFields);
  }
  if (!when.delay_ms && !when.deliver_at_ms) {
    return Status::InvalidArgument("give the new due time as delay_ms, delay or deliver_at");
  }
  return when;
}

}  // namespace delayq::wire
