// Byte encoding helpers: big-endian integers (which sort as bytes) and a varint record
// reader/writer. Used by the storage key layouts and the record codec.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace delayq {

inline void PutBigEndian64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 7; i >= 0; --i) {
    b[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  out->append(b, 8);
}

inline uint64_t GetBigEndian64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

// Appends fields; pairs with ByteReader.
class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}
  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_->push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_->push_back(static_cast<char>(v));
  }
  // Zig-zag, so small negative numbers stay short.
  void SignedVarint(int64_t v) { Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void Fixed64(uint64_t v) { PutBigEndian64(out_, v); }
  void Bytes(std::string_view s) {
    Varint(s.size());
    out_->append(s);
  }

 private:
  std::string* out_;
};

// Reads fields; every method returns false on truncated or malformed input.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  bool U8(uint8_t* v) {
    if (in_.empty()) return false;
    *v = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }
  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
      if (in_.empty()) return false;
      auto byte = static_cast<uint8_t>(in_[0]);
      in_.remove_prefix(1);
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  bool SignedVarint(int64_t* v) {
    uint64_t u;
    if (!Varint(&u)) return false;
    *v = static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
    return true;
  }
  bool Fixed64(uint64_t* v) {
    if (in_.size() < 8) return false;
    *v = GetBigEndian64(in_);
    in_.remove_prefix(8);
    return true;
  }
  bool Bytes(std::string_view* s) {
    uint64_t n;
    if (!Varint(&n) || n > in_.size()) return false;
    *s = in_.substr(0, n);
    in_.remove_prefix(n);
    return true;
  }
  bool Bytes(std::string* s) {
    std::string_view v;
    if (!Bytes(&v)) return false;
    s->assign(v);
    return true;
  }
  bool empty() const { return in_.empty(); }
  // What is left to read.
  std::string_view rest() const { return in_; }

 private:
  std::string_view in_;
};

}  // namespace delayq
