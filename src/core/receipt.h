// Receipts name one delivery of one job: "<job id>.<delivery token in hex>". The token is drawn
// for each delivery from the OS CSPRNG (128 bits) and stored with the job, so a receipt from an
// earlier delivery no longer matches once the job was delivered again, and no client can guess
// the receipt of a delivery it did not receive.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/delivery_token.h"
#include "core/ulid.h"
#include "delayq/status.h"

namespace delayq {

struct Receipt {
  Ulid id;
  DeliveryToken token;

  std::string ToString() const { return id.ToString() + "." + token.Hex(); }

  static Result<Receipt> Parse(std::string_view text) {
    auto bad = [&] {
      return Status::InvalidArgument(fmt::format(
          "receipt \"{}\" is not a delayq receipt; use the receipt field of a reserved job as is",
          text.substr(0, 80)));
    };
    if (text.size() < 27 || text[26] != '.') return bad();
    auto id = Ulid::Parse(text.substr(0, 26));
    if (!id) return bad();
    auto token = DeliveryToken::Parse(text.substr(27));
    if (!token) return bad();
    return Receipt{*id, *token};
  }
};

// For each receipt of a batch, the index of the first receipt naming the same delivery (its own
// index when it is the first, or when it does not parse). Ids are case-insensitive, so two
// spellings can name one delivery. Every store acks such a delivery once, and every copy
// answers what the first did; the HTTP API counts it once.
inline std::vector<size_t> FirstOccurrences(std::span<const std::string> receipts) {
  std::vector<size_t> first(receipts.size());
  std::map<std::pair<Ulid, DeliveryToken>, size_t> seen;
  for (size_t i = 0; i < receipts.size(); ++i) {
    auto r = Receipt::Parse(receipts[i]);
    first[i] = r.ok() ? seen.try_emplace({r->id, r->token}, i).first->second : i;
  }
  return first;
}

}  // namespace delayq
