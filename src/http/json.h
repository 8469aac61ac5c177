// JSON for the HTTP API: reading request bodies (simdjson, which can hand back the exact text
// of a value, so a JSON payload is stored and returned verbatim) and writing responses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq::http {

// Writes compact JSON into a string. Why not nlohmann::json: responses embed stored payloads
// as raw, already-validated JSON text, which its serializer cannot do without re-parsing them,
// and this writer needs no intermediate tree on the hot reserve/enqueue paths.
// Strings are escaped; invalid UTF-8 in them is replaced by U+FFFD, so output is always valid.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  JsonWriter& Raw(std::string_view json);  // a complete, valid JSON value
  std::string Take() { return std::move(out_); }
  const std::string& str() const { return out_; }

 private:
  void Separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

std::string Base64Encode(std::string_view bytes);
// nullopt when `text` is not standard base64 (padding optional).
std::optional<std::string> Base64Decode(std::string_view text);

// True when `bytes` is exactly one valid JSON value (surrounding whitespace allowed).
bool IsJsonValue(std::string_view bytes);

// Parsed request bodies. Every error is kInvalidArgument naming the field ("jobs[3].delay_ms").
// Unknown fields are ignored (clients may be newer); known fields of the wrong type are errors.
constexpr size_t kMaxJsonDepth = 64;

struct EnqueueBody {
  std::vector<EnqueueRequest> jobs;
  bool batch = false;  // {"jobs": [...]}
};
Result<EnqueueBody> ParseEnqueue(std::string_view body);

Result<ReserveRequest> ParseReserve(std::string_view body);

struct ReceiptsBody {
  std::vector<std::string> receipts;
  bool batch = false;  // "receipts": [...] rather than "receipt": "..."
  std::optional<int64_t> retry_in_ms;  // nack
  std::string error;                   // nack
  bool dead = false;                   // nack
  std::optional<int64_t> lease_ms;     // touch
};
Result<ReceiptsBody> ParseReceipts(std::string_view body);

Result<When> ParseWhen(std::string_view body);  // PATCH: delay_ms | delay | deliver_at
Result<std::vector<std::string>> ParseReplay(std::string_view body);  // {"ids": [...]} or empty
// A full config (PUT replaces it; fields not given keep `base`'s values).
Result<QueueConfig> ParseConfig(std::string_view body, const QueueConfig& base);

// Response bodies.
void WriteJob(JsonWriter& w, const Job& job);
void WriteDelivery(JsonWriter& w, const Delivery& d);
void WriteStats(JsonWriter& w, const QueueStats& s);
void WriteConfig(JsonWriter& w, const QueueConfig& c);
// The payload as "payload" (stored JSON, verbatim) or "payload_base64" (binary).
void WritePayload(JsonWriter& w, std::string_view payload, bool binary);
std::string ErrorBody(Code code, std::string_view message);

}  // namespace delayq::http
