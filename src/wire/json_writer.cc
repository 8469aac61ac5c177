#include "wire/json_writer.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cmath>

namespace delayq::wire {

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  Separate();
  out_.push_back('{');
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  out_.push_back('}');
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::BeginArray() {
  Separate();
  out_.push_back('[');
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  out_.push_back(']');
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::Key(std::string_view key) {
  String(key);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view s) {
  Separate();
  out_.push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    unsigned char c = *p;
    if (c < 0x80) {
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            out_ += fmt::format("\\u{:04x}", c);
          } else {
            out_.push_back(static_cast<char>(c));
          }
      }
      ++p;
      continue;
    }
    // A multi-byte UTF-8 sequence: copy it when valid, else write U+FFFD for one byte.
    int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    bool ok = len > 0 && end - p >= len &&
              simdjson::validate_utf8(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    if (ok) {
      out_.append(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
      p += len;
    } else {
      out_ += "\xef\xbf\xbd";
      ++p;
    }
  }
  out_.push_back('"');
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t v) {
  Separate();
  out_ += fmt::format("{}", v);
  return *this;
}
JsonWriter& JsonWriter::Uint(uint64_t v) {
  Separate();
  out_ += fmt::format("{}", v);
  return *this;
}
JsonWriter& JsonWriter::Double(double v) {
  Separate();
  if (!std::isfinite(v)) v = 0;
  out_ += fmt::format("{}", v);
  return *this;
}
JsonWriter& JsonWriter::Bool(bool v) {
  Separate();
  out_ += v ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::Null() {
  Separate();
  out_ += "null";
  return *this;
}
JsonWriter& JsonWriter::Raw(std::string_view json) {
  Separate();
  out_ += json;
  return *this;
}

// ---------------------------------------------------------------------------------------------
// Base64 (RFC 4648, standard alphabet). Written here because the standard library has none,
// Beast's is in a detail namespace, and OpenSSL's EVP_DecodeBlock skips whitespace and answers a
// length that counts the padding; the wire format wants exactly RFC 4648 (padding optional).

namespace {
constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
int B64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v =
        (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], kB64[v & 63]};
  }
  if (i + 1 == in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8);
    out += {kB64[v >> 18], kB64[(v >> 12) & 63], kB64[(v >> 6) & 63], '='};
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = B64Value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace delayq::wire
