#include "wire/receipts.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/validate.h"
#include "wire/json_read.h"
#include "wire/json_writer.h"

namespace delayq::wire {
namespace {

// The successes of a batch, each delivery once (a receipt repeated in the batch counts once).
int64_t CountOk(const std::vector<Status>& statuses, const std::vector<size_t>& first) {
  int64_t n = 0;
  for (size_t i = 0; i < statuses.size(); ++i) n += first[i] == i && statuses[i].ok();
  return n;
}

// The failures of a batch, one entry per receipt as spelled (a client finds each of its
// receipts there), without repeating an identical one.
void WriteFailures(JsonWriter& w, const std::vector<std::string>& receipts, const std::vector<Status>& statuses) {
  std::set<std::string_view> listed;
  w.Key("failed").BeginArray();
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i].ok() || !listed.insert(receipts[i]).second) continue;
    w.BeginObject();
    w.Key("receipt").String(receipts[i]);
    w.Key("code").String(CodeName(statuses[i].code()));
    w.Key("message").String(statuses[i].message());
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string WriteAckRequest(std::span<const std::string> receipts, bool batch) {
  JsonWriter w;
  w.BeginObject();
  if (batch) {
    w.Key("receipts").BeginArray();
    for (const auto& r : receipts) w.String(r);
    w.EndArray();
  } else {
    w.Key("receipt").String(receipts.empty() ? std::string_view() : std::string_view(receipts.front()));
  }
  w.EndObject();
  return w.Take();
}

std::string WriteAckRequest(std::span<const AckRequest> requests, bool batch) {
  JsonWriter w;
  w.BeginObject();
  auto entry = [&w](const AckRequest& r) {
    if (!r.result) return void(w.String(r.receipt));
    w.BeginObject().Key("receipt").String(r.receipt).Key("result").Raw(*r.result).EndObject();
  };
  if (batch) {
    w.Key("receipts").BeginArray();
    for (const auto& r : requests) entry(r);
    w.EndArray();
  } else if (!requests.empty()) {
    w.Key("receipt").String(requests.front().receipt);
    if (requests.front().result) w.Key("result").Raw(*requests.front().result);
  }
  w.EndObject();
  return w.Take();
}

std::string WriteNackRequest(const NackRequest& request) {
  JsonWriter w;
  w.BeginObject().Key("receipt").String(request.receipt);
  if (request.retry_in_ms) w.Key("retry_in_ms").Int(*request.retry_in_ms);
  if (!request.error.empty()) w.Key("error").String(request.error);
  if (request.dead) w.Key("dead").Bool(true);
  w.EndObject();
  return w.Take();
}

std::string WriteTouchRequest(const TouchRequest& request) {
  JsonWriter w;
  w.BeginObject().Key("receipt").String(request.receipt);
  if (request.lease_ms) w.Key("lease_ms").Int(*request.lease_ms);
  if (request.progress) w.Key("progress").Raw(*request.progress);
  w.EndObject();
  return w.Take();
}

namespace {

// One entry of an ack's "receipts": a receipt, or {"receipt", "result"}.
Status ParseAckEntry(sj::value v, size_t i, ReceiptsBody& out) {
  std::string_view s;
  if (!v.get_string().get(s)) {
    out.receipts.emplace_back(s);
    out.results.emplace_back();
    return Status::Ok();
  }
  const std::string at = fmt::format("receipts[{}]", i);
  sj::object entry;
  if (v.get_object().get(entry)) return TypeError(at, "a receipt (a string) or {\"receipt\", \"result\"}");
  constexpr std::string_view kEntryFields[] = {"receipt", "result"};
  std::optional<std::string> receipt, result;
  for (auto f : entry) {
    std::string_view key;
    sj::value value;
    if (f.unescaped_key().get(key) || f.value().get(value)) return Status::InvalidArgument("malformed field");
    if (key == "receipt") {
      receipt.emplace();
      DELAYQ_RETURN_IF_ERROR(GetString(value, at + ".receipt", &*receipt));
    } else if (key == "result") {
      if (IsNull(value)) continue;
      result.emplace();
      DELAYQ_RETURN_IF_ERROR(RawValue(value, at + ".result", &*result));
      DELAYQ_RETURN_IF_ERROR(ValidateResult(*result, at + ".result"));
    } else {
      return UnknownField(at + ".", key, kEntryFields);
    }
  }
  if (!receipt) return Status::InvalidArgument(at + ".receipt is missing");
  out.receipts.push_back(std::move(*receipt));
  out.results.push_back(std::move(result));
  return Status::Ok();
}

}  // namespace

Result<ReceiptsBody> ParseReceiptsRequest(std::string_view body, ReceiptsFor route) {
  constexpr std::string_view kAckFields[] = {"receipt", "receipts", "result"};
  constexpr std::string_view kReleaseFields[] = {"receipt", "receipts"};
  constexpr std::string_view kNackFields[] = {"receipt", "receipts", "retry_in_ms", "error", "dead"};
  constexpr std::string_view kTouchFields[] = {"receipt", "receipts", "lease_ms", "progress"};
  using Names = std::span<const std::string_view>;
  const Names known = route == ReceiptsFor::kAck       ? Names(kAckFields)
                      : route == ReceiptsFor::kNack    ? Names(kNackFields)
                      : route == ReceiptsFor::kRelease ? Names(kReleaseFields)
                                                       : Names(kTouchFields);
  auto d = OpenRequest(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  ReceiptsBody out;
  bool single = false;
  std::optional<std::string> result;  // the single form's
  for (auto f : obj) {
    std::string_view key;
    sj::value v;
    if (f.unescaped_key().get(key) || f.value().get(v)) return Status::InvalidArgument("malformed field");
    int64_t n;
    if (std::find(known.begin(), known.end(), key) == known.end()) return UnknownField("", key, known);
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
        if (route == ReceiptsFor::kAck) {
          sj::value ev;
          if (element.get(ev))
            return TypeError(fmt::format("receipts[{}]", i), "a receipt or {\"receipt\", \"result\"}");
          DELAYQ_RETURN_IF_ERROR(ParseAckEntry(ev, i, out));
        } else {
          std::string_view s;
          if (element.get_string().get(s)) return TypeError(fmt::format("receipts[{}]", i), "a string");
          out.receipts.emplace_back(s);
        }
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
    } else if (key == "progress" && !IsNull(v)) {
      std::string raw;
      DELAYQ_RETURN_IF_ERROR(RawValue(v, "progress", &raw));
      out.progress = std::move(raw);
    } else if (key == "result" && !IsNull(v)) {
      result.emplace();
      DELAYQ_RETURN_IF_ERROR(RawValue(v, "result", &*result));
      DELAYQ_RETURN_IF_ERROR(ValidateResult(*result));
    }
  }
  if (result && out.batch) {
    return Status::InvalidArgument(
        "result is given beside receipts; give each its own: {\"receipts\": "
        "[{\"receipt\": \"...\", \"result\": ...}]}");
  }
  if (single) {
    out.results.clear();
    out.results.push_back(std::move(result));
  }
  // No entry with a result: none kept (a plain ack batch costs nothing more).
  if (std::none_of(out.results.begin(), out.results.end(), [](const auto& r) { return r.has_value(); })) {
    out.results.clear();
  }
  if (single && out.batch) {
    return Status::InvalidArgument("receipt and receipts are both given; give one of them");
  }
  // A bad lease_ms or progress fails the whole request, not each receipt of a batch.
  DELAYQ_RETURN_IF_ERROR(ValidateTouch(TouchRequest{{}, out.lease_ms, out.progress}));
  if (out.receipts.empty()) {
    return Status::InvalidArgument(out.batch ? "receipts is empty"
                                             : "receipt is missing; give \"receipt\" or \"receipts\"");
  }
  if (out.receipts.size() > Limits::kMaxBatch) {
    return Status::TooLarge(
        fmt::format("receipts has {} entries; at most {} are allowed", out.receipts.size(), Limits::kMaxBatch));
  }
  return out;
}

std::string WriteNackResponse(const NackResult& r) {
  JsonWriter w;
  w.BeginObject().Key("state").String(JobStateName(r.state));
  w.Key("due_at").Int(r.due_at_ms);  // when dead: the due time the job had
  w.EndObject();
  return w.Take();
}

std::string WriteTouchResponse(const TouchResult& r) {
  JsonWriter w;
  w.BeginObject().Key("lease_deadline").Int(r.lease_deadline_ms).EndObject();
  return w.Take();
}

std::string WriteBatchResponse(std::string_view count_field, const std::vector<std::string>& receipts,
                               const std::vector<Status>& statuses, const std::vector<size_t>& first) {
  JsonWriter w;
  w.BeginObject().Key(count_field).Int(CountOk(statuses, first));
  WriteFailures(w, receipts, statuses);
  w.EndObject();
  return w.Take();
}

Result<NackResult> ParseNackResponse(std::string_view body) {
  auto d = OpenResponse(body, "nack");
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

Result<std::vector<Status>> ParseBatchResponse(std::string_view body, const std::vector<std::string>& receipts) {
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

}  // namespace delayq::wire
