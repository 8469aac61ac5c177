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

Result<ReceiptsBody> ParseReceiptsRequest(std::string_view body, ReceiptsFor route) {
  constexpr std::string_view kAckFields[] = {"receipt", "receipts"};
  constexpr std::string_view kNackFields[] = {"receipt", "receipts", "retry_in_ms", "error", "dead"};
  constexpr std::string_view kTouchFields[] = {"receipt", "receipts", "lease_ms", "progress"};
  using Names = std::span<const std::string_view>;
  const Names known = route == ReceiptsFor::kAck    ? Names(kAckFields)
                      : route == ReceiptsFor::kNack ? Names(kNackFields)
                                                    : Names(kTouchFields);
  auto d = OpenRequest(body);
  if (!d.ok()) return d.status();
  sj::object obj;
  if ((*d)->doc.get_object().get(obj)) return Status::InvalidArgument("the body must be a JSON object");
  ReceiptsBody out;
  bool single = false;
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
        std::string_view s;
        if (element.get_string().get(s)) return TypeError(fmt::format("receipts[{}]", i), "a string");
        out.receipts.emplace_back(s);
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
    }
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
