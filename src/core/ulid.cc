#include "core/ulid.h"

#include <algorithm>

#include "core/random.h"

namespace delayq {
namespace {

constexpr char kAlphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

// Each character's base32 digit (-1: not Crockford base32), case-insensitive; I and L read as 1,
// O as 0. A table: receipts are parsed twice per ack, and a search of the alphabet was 3.5 % of
// an in-process reserve + ack.
constexpr std::array<int8_t, 256> MakeDigits() {
  std::array<int8_t, 256> d{};
  d.fill(-1);
  for (int i = 0; i < 32; ++i) {
    const char c = kAlphabet[i];
    d[static_cast<unsigned char>(c)] = static_cast<int8_t>(i);
    if (c >= 'A' && c <= 'Z') d[static_cast<unsigned char>(c - 'A' + 'a')] = static_cast<int8_t>(i);
  }
  for (char c : {'I', 'i', 'L', 'l'}) d[static_cast<unsigned char>(c)] = 1;
  for (char c : {'O', 'o'}) d[static_cast<unsigned char>(c)] = 0;
  return d;
}
constexpr std::array<int8_t, 256> kDigits = MakeDigits();

int DecodeChar(char c) { return kDigits[static_cast<unsigned char>(c)]; }

}  // namespace

int64_t Ulid::TimestampMs() const {
  int64_t t = 0;
  for (int i = 0; i < 6; ++i) t = (t << 8) | bytes[i];
  return t;
}

// 128 bits as 26 base32 digits: the first digit holds the top 3 bits (so the first character of
// a valid ULID is 0..7), then 25 digits of 5 bits.
std::string Ulid::ToString() const {
  std::string out(26, '0');
  unsigned __int128 v = 0;
  for (uint8_t b : bytes) v = (v << 8) | b;
  for (int i = 25; i >= 0; --i) {
    out[i] = kAlphabet[static_cast<int>(v & 31)];
    v >>= 5;
  }
  return out;
}

std::optional<Ulid> Ulid::Parse(std::string_view text) {
  if (text.size() != 26) return std::nullopt;
  unsigned __int128 v = 0;
  for (size_t i = 0; i < 26; ++i) {
    int d = DecodeChar(text[i]);
    if (d < 0 || (i == 0 && d > 7)) return std::nullopt;
    v = (v << 5) | static_cast<unsigned>(d);
  }
  Ulid u;
  for (int i = 15; i >= 0; --i) {
    u.bytes[i] = static_cast<uint8_t>(v & 0xff);
    v >>= 8;
  }
  return u;
}

Ulid Ulid::FromRaw(std::string_view raw16) {
  Ulid u;
  std::memcpy(u.bytes.data(), raw16.data(), 16);
  return u;
}

Ulid UlidGenerator::Next(int64_t now_ms) {
  Ulid u;
  if (now_ms > last_.TimestampMs()) {
    for (int i = 5; i >= 0; --i) {
      u.bytes[i] = static_cast<uint8_t>(now_ms & 0xff);
      now_ms >>= 8;
    }
    SecureRandomBytes(u.bytes.data() + 6, 10);
    u.bytes[6] &= 0x7f;  // leave room to increment within the millisecond
  } else {
    // Within the millisecond: add a random step of 1..2^32 to the 80-bit random part, so that
    // ids stay ordered without the next one being the previous plus one.
    u = last_;
    uint64_t step = 0;
    SecureRandomBytes(&step, 4);
    step += 1;
    for (int i = 15; i >= 6 && step != 0; --i) {
      const uint64_t sum = u.bytes[i] + (step & 0xff);
      u.bytes[i] = static_cast<uint8_t>(sum);
      step = (step >> 8) + (sum >> 8);
    }
  }
  last_ = u;
  return u;
}

Ulid UlidGenerator::NextTagged(int64_t now_ms, uint32_t tag) {
  Ulid u;
  uint64_t random = 0;  // bytes 6..11
  for (int i = 6; i < 12; ++i) random = (random << 8) | last_.bytes[i];
  uint64_t step = 0;
  SecureRandomBytes(&step, 3);
  step += 1;
  int64_t ms = last_.TimestampMs();
  constexpr uint64_t kRandomEnd = uint64_t{1} << 48;
  if (now_ms > ms || random + step >= kRandomEnd) {
    // A new millisecond (or the random part of this one is used up: the next one, so that ids
    // keep increasing).
    ms = std::max(now_ms, ms + (now_ms > ms ? 0 : 1));
    SecureRandomBytes(&random, 6);
    random &= (kRandomEnd >> 1) - 1;  // leave room to increment within the millisecond
  } else {
    random += step;
  }
  for (int i = 5; i >= 0; --i, ms >>= 8) u.bytes[i] = static_cast<uint8_t>(ms & 0xff);
  for (int i = 11; i >= 6; --i, random >>= 8) u.bytes[i] = static_cast<uint8_t>(random & 0xff);
  for (int i = 15; i >= 12; --i, tag >>= 8) u.bytes[i] = static_cast<uint8_t>(tag & 0xff);
  last_ = u;  // greater than the last: a later millisecond, or the same with a greater random part
  return u;
}

void UlidGenerator::Observe(const Ulid& id) {
  if (id > last_) last_ = id;
}

}  // namespace delayq
