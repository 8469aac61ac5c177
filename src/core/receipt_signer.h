// Signs receipts so that a store can refuse one it never issued without looking the job up: a
// forged receipt then tells nothing about which job ids exist (a lookup answered 404 for a
// missing job and 409 for a wrong token). The tag is the first 64 bits of HMAC-SHA256 (OpenSSL's
// SHA-256) under the store's secret, over the queue, the job id and the delivery token; the
// secret is kept in the store (so every server sharing a Redis agrees) and made once, from the
// CSPRNG. Immutable after construction: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/receipt.h"
#include "delayq/status.h"

namespace delayq {

class ReceiptSigner {
 public:
  static constexpr size_t kSecretBytes = 32;
  // A fresh secret from the OS CSPRNG, to be stored by the caller.
  static std::string NewSecret();

  // `secret`: kSecretBytes bytes (NewSecret()).
  explicit ReceiptSigner(std::string_view secret);
  ~ReceiptSigner();
  ReceiptSigner(const ReceiptSigner&) = delete;
  ReceiptSigner& operator=(const ReceiptSigner&) = delete;

  // The receipt text handed to the consumer: "<id>.<token>.<tag>".
  std::string Issue(std::string_view queue, const Receipt& receipt) const;

  // The receipt when `text` is one this store issued for `queue`. kInvalidArgument otherwise,
  // with one message whether or not the job exists: malformed, unsigned (issued before tags),
  // for another queue or tampered with.
  Result<Receipt> Open(std::string_view queue, std::string_view text) const;
  // The same for a receipt already parsed from `text` (ParseReceipts), so a batch is parsed once.
  Result<Receipt> Open(std::string_view queue, std::string_view text, const Result<Receipt>& parsed) const;

 private:
  uint64_t Tag(std::string_view queue, const Receipt& receipt) const;
  struct Keyed;  // SHA-256 states after the key's inner and outer pads
  std::unique_ptr<const Keyed> keyed_;
};

}  // namespace delayq
