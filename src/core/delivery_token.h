// The token that names one delivery of a job: 128 bits from the OS CSPRNG, drawn at each
// reserve and stored with the job. A receipt is "<job id>.<token in hex>".
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/random.h"

namespace delayq {

// 16 lowercase hex digits as a number; false for anything else. (Every receipt of an ack is
// parsed: this runs for ~200 000 receipts a second.)
inline bool ParseHex64(std::string_view hex, uint64_t* out) {
  if (hex.size() != 16) return false;
  uint64_t v = 0;
  bool ok = true;
  for (char c : hex) {
    const bool digit = c >= '0' && c <= '9';
    const bool letter = c >= 'a' && c <= 'f';
    ok &= digit || letter;
    v = (v << 4) | static_cast<uint64_t>(digit ? c - '0' : c - 'a' + 10);
  }
  *out = v;
  return ok;
}

// Appends `v` as 16 lowercase hex digits (ParseHex64's inverse; runs for every receipt issued).
inline void AppendHex64(std::string& out, uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char buf[16];
  for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = kDigits[v & 15];
  out.append(buf, sizeof buf);
}

// The token of one delivery. {0, 0}: never delivered. Tokens of deliveries made before record
// format 2 are 64 bits (hi == 0) and print as 16 hex digits; new ones as 32.
struct DeliveryToken {
  uint64_t hi = 0, lo = 0;

  bool empty() const { return hi == 0 && lo == 0; }
  auto operator<=>(const DeliveryToken&) const = default;
  std::string Hex() const {
    std::string out;
    AppendHexTo(out);
    return out;
  }
  void AppendHexTo(std::string& out) const {
    if (hi != 0) AppendHex64(out, hi);
    AppendHex64(out, lo);
  }

  static DeliveryToken Random() {
    DeliveryToken t;
    while (t.hi == 0 || t.lo == 0) {  // hi != 0 marks a 128-bit token
      uint64_t v[2];
      SecureRandomBytes(v, sizeof v);
      t = {v[0], v[1]};
    }
    return t;
  }
  // 16 or 32 lowercase hex digits, not all zero.
  static std::optional<DeliveryToken> Parse(std::string_view hex) {
    if (hex.size() != 16 && hex.size() != 32) return std::nullopt;
    DeliveryToken t;
    if (hex.size() == 32 && !ParseHex64(hex.substr(0, 16), &t.hi)) return std::nullopt;
    if (!ParseHex64(hex.substr(hex.size() - 16), &t.lo)) return std::nullopt;
    if (t.empty() || (hex.size() == 32 && t.hi == 0)) return std::nullopt;  // one spelling each
    return t;
  }
};

}  // namespace delayq
