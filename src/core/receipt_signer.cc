#include "core/receipt_signer.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdlib>

#include "core/random.h"

namespace delayq {

std::string ReceiptSigner::NewSecret() {
  std::string secret(kSecretBytes, '\0');
  SecureRandomBytes(secret.data(), secret.size());
  return secret;
}

ReceiptSigner::ReceiptSigner(std::string secret) : secret_(std::move(secret)) {
  if (secret_.size() != kSecretBytes) std::abort();  // a programming error: signing with no key
}

uint64_t ReceiptSigner::Tag(std::string_view queue, const Receipt& receipt) const {
  // queue, a NUL (no queue name holds one), then the id and the token as fixed-width bytes.
  std::string data(queue);
  data.push_back('\0');
  data.append(receipt.id.Raw());
  for (uint64_t half : {receipt.token.hi, receipt.token.lo}) {
    for (int shift = 56; shift >= 0; shift -= 8) data.push_back(static_cast<char>(half >> shift));
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &mac_len);
  uint64_t tag = 0;
  for (int i = 0; i < 8; ++i) tag = (tag << 8) | mac[i];
  return tag;
}

std::string ReceiptSigner::Issue(std::string_view queue, const Receipt& receipt) const {
  return fmt::format("{}.{:016x}", receipt.ToString(), Tag(queue, receipt));
}

Result<Receipt> ReceiptSigner::Open(std::string_view queue, std::string_view text) const {
  auto receipt = Receipt::Parse(text);
  if (!receipt.ok()) return receipt.status();
  // Compared in full, not byte by byte with an early exit (the tag is a MAC).
  if (!receipt->tag || (*receipt->tag ^ Tag(queue, *receipt)) != 0) {
    return Status::InvalidArgument(
        fmt::format("receipt \"{}\" was not issued for a delivery from queue \"{}\"; use the receipt field of "
                    "a job reserved from this queue as is",
                    text.substr(0, 80), queue.substr(0, 200)));
  }
  return receipt;
}

}  // namespace delayq
