// Receipts name one delivery of one job: "<job id>.<delivery token in hex>". The token is drawn
// at random for each delivery and stored with the job, so a receipt from an earlier delivery
// no longer matches once the job was delivered again.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/ulid.h"
#include "delayq/status.h"

namespace delayq {

struct Receipt {
  Ulid id;
  uint64_t delivery = 0;

  std::string ToString() const { return fmt::format("{}.{:016x}", id.ToString(), delivery); }

  static Result<Receipt> Parse(std::string_view text) {
    auto bad = [&] {
      return Status::InvalidArgument(fmt::format(
          "receipt \"{}\" is not a delayq receipt; use the receipt field of a reserved job as is",
          text.substr(0, 80)));
    };
    if (text.size() != 26 + 1 + 16 || text[26] != '.') return bad();
    auto id = Ulid::Parse(text.substr(0, 26));
    if (!id) return bad();
    uint64_t delivery = 0;
    for (char c : text.substr(27)) {
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else return bad();
      delivery = (delivery << 4) | static_cast<uint64_t>(d);
    }
    if (delivery == 0) return bad();
    return Receipt{*id, delivery};
  }
};

// For each receipt of a batch, the index of the first receipt naming the same delivery (its own
// index when it is the first, or when it does not parse). Ids are case-insensitive, so two
// spellings can name one delivery. Every store acks such a delivery once, and every copy
// answers what the first did; the HTTP API counts it once.
inline std::vector<size_t> FirstOccurrences(std::span<const std::string> receipts) {
  std::vector<size_t> first(receipts.size());
  std::map<std::pair<Ulid, uint64_t>, size_t> seen;
  for (size_t i = 0; i < receipts.size(); ++i) {
    auto r = Receipt::Parse(receipts[i]);
    first[i] = r.ok() ? seen.try_emplace({r->id, r->delivery}, i).first->second : i;
  }
  return first;
}

}  // namespace delayq
