// Writing JSON for the wire format (both directions: the server's answers, the client's
// requests), and base64 for binary payloads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delayq::wire {

// Writes compact JSON into a string. Why not nlohmann::json: answers embed stored payloads as
// raw, already-validated JSON text, which its serializer cannot do without parsing them again,
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
  JsonWriter& Double(double value);  // not finite: 0
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

}  // namespace delayq::wire
