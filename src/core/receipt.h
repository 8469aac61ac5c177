// Receipts name one delivery of one job: "<job id>.<delivery token in hex>.<tag>". The token is
// drawn for each delivery from the OS CSPRNG (128 bits) and stored with the job, so a receipt
// from an earlier delivery no longer matches once the job was delivered again, and no client can
// guess the receipt of a delivery it did not receive. The tag (receipt_signer.h) lets a store
// refuse a receipt it never issued before it looks the job up.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
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
  std::optional<uint64_t> tag;  // absent in receipts from before tags (refused by the stores)

  // "<id>.<token>", without the tag (ReceiptSigner::Issue adds it).
  std::string ToString() const {
    std::string out;
    out.reserve(26 + 1 + 32 + 1 + 16);  // room for the tag Issue appends
    out = id.ToString();
    out.push_back('.');
    token.AppendHexTo(out);
    return out;
  }

  // The three parts; kInvalidArgument when it is not shaped like a receipt. Says nothing about
  // whether the tag is right: ReceiptSigner::Open does.
  static Result<Receipt> Parse(std::string_view text) {
    auto bad = [&] {
      return Status::InvalidArgument(fmt::format(
          "receipt \"{}\" is not a delayq receipt; use the receipt field of a reserved job as is", text.substr(0, 80)));
    };
    if (text.size() < 27 || text[26] != '.') return bad();
    auto id = Ulid::Parse(text.substr(0, 26));
    if (!id) return bad();
    std::string_view rest = text.substr(27);
    std::optional<uint64_t> tag;
    if (const size_t dot = rest.find('.'); dot != std::string_view::npos) {
      uint64_t v = 0;
      if (!ParseHex64(rest.substr(dot + 1), &v)) return bad();
      tag = v;
      rest = rest.substr(0, dot);
    }
    auto token = DeliveryToken::Parse(rest);
    if (!token) return bad();
    return Receipt{*id, *token, tag};
  }
};

// For each receipt of a batch, the index of the first receipt naming the same delivery with the
// same tag (its own index when it is the first, or when it does not parse). Ids are case-insensitive, so two
// spellings can name one delivery. Every store acks such a delivery once, and every copy
// answers what the first did; the HTTP API counts it once.
// `parsed` holds Receipt::Parse of each receipt (ParseReceipts), so a store parses a batch once.
inline std::vector<size_t> FirstOccurrences(std::span<const Result<Receipt>> parsed) {
  std::vector<size_t> first(parsed.size());
  // The parsed deliveries sorted with their index: equal ones are then side by side, the first
  // given first (one allocation, where a map took one per receipt).
  // The tag too: a receipt with another tag names the same delivery but is not the same receipt
  // (a tampered copy beside the genuine one made the genuine one answer the copy's refusal, or
  // hid the copy's; a hostile try found it). Each is opened, and answered, on its own.
  std::vector<std::tuple<Ulid, DeliveryToken, std::optional<uint64_t>, size_t>> seen;
  seen.reserve(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    first[i] = i;
    if (parsed[i].ok()) seen.emplace_back(parsed[i]->id, parsed[i]->token, parsed[i]->tag, i);
  }
  std::sort(seen.begin(), seen.end());
  for (size_t j = 1; j < seen.size(); ++j) {
    const auto& [id, token, tag, i] = seen[j];
    const auto& [prev_id, prev_token, prev_tag, prev_i] = seen[j - 1];
    if (id == prev_id && token == prev_token && tag == prev_tag) first[i] = first[prev_i];
  }
  return first;
}

// Receipt::Parse of each receipt, in order.
inline std::vector<Result<Receipt>> ParseReceipts(std::span<const std::string> receipts) {
  std::vector<Result<Receipt>> parsed;
  parsed.reserve(receipts.size());
  for (const auto& r : receipts) parsed.push_back(Receipt::Parse(r));
  return parsed;
}

inline std::vector<size_t> FirstOccurrences(std::span<const std::string> receipts) {
  return FirstOccurrences(ParseReceipts(receipts));
}

}  // namespace delayq
