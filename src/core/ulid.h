// Job ids: ULIDs (48-bit millisecond timestamp + 80 bits), 16 bytes, sortable by creation time.
// Text form: 26 characters of Crockford base32, e.g. "01JDQ8Z3K6T6V3W1C9X2N4M5PQ".
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace delayq {

struct Ulid {
  std::array<uint8_t, 16> bytes{};

  int64_t TimestampMs() const;
  std::string ToString() const;
  // nullopt unless `text` is 26 valid Crockford base32 characters (case-insensitive).
  static std::optional<Ulid> Parse(std::string_view text);
  std::string_view Raw() const { return {reinterpret_cast<const char*>(bytes.data()), 16}; }
  static Ulid FromRaw(std::string_view raw16);

  auto operator<=>(const Ulid&) const = default;
  bool operator==(const Ulid&) const = default;
};

struct UlidHash {
  size_t operator()(const Ulid& u) const {
    uint64_t a, b;
    std::memcpy(&a, u.bytes.data(), 8);
    std::memcpy(&b, u.bytes.data() + 8, 8);
    return std::hash<uint64_t>()(a ^ (b * 0x9E3779B97F4A7C15ULL));
  }
};

// Generates strictly increasing ULIDs whose random part comes from the OS CSPRNG: within one
// millisecond (or if the clock steps back) the random part of the previous id grows by a random
// step of 1..2^32, so a client cannot tell the next id from its own. Not thread-safe; callers
// serialize.
class UlidGenerator {
 public:
  Ulid Next(int64_t now_ms);
  // The same, but the last 4 bytes are `tag` (big-endian) and the random part is the 6 bytes
  // before them (a random step of 1..2^24 within a millisecond). The embedded store tags an id
  // with its job's first due bucket, to find the job from its id (store/embedded/keys.h).
  // Tagged and untagged ids of one generator are increasing together.
  Ulid NextTagged(int64_t now_ms, uint32_t tag);
  // Ensures later ids sort after `id` (used after recovery).
  void Observe(const Ulid& id);

 private:
  Ulid last_{};
};

}  // namespace delayq
