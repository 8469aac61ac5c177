// HMAC-SHA256 written out over OpenSSL's SHA-256 (RFC 2104: H(K ^ opad, H(K ^ ipad, m))), not
// through EVP_MAC. Why: EVP_MAC's HMAC restarts by copying its digest contexts through OpenSSL's
// provider layer (a heap allocation each) and dispatches every call there: ~450 ns a tag, which
// was 20 % of an in-process reserve + ack (reserve signs each receipt, ack opens each). Here the
// two SHA-256 states after the padded key are computed once; a tag copies them (plain structs)
// and hashes ~40 bytes: ~100 ns with the CPU's SHA instructions, which OpenSSL's SHA-256 uses.
// The low-level SHA256_* calls are deprecated in OpenSSL 3.0 (in favour of EVP) but kept
// through 3.x; the output is the same HMAC (tests/core/receipt_test.cc checks it against
// Python's hmac), so receipts stay valid across releases and between servers on one Redis.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "core/receipt_signer.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cstdlib>

#include "core/random.h"

namespace delayq {

struct ReceiptSigner::Keyed {
  SHA256_CTX inner;  // after SHA-256 of (key ^ ipad)
  SHA256_CTX outer;  // after SHA-256 of (key ^ opad)
};

std::string ReceiptSigner::NewSecret() {
  std::string secret(kSecretBytes, '\0');
  SecureRandomBytes(secret.data(), secret.size());
  return secret;
}

ReceiptSigner::ReceiptSigner(std::string_view secret) {
  // A programming error: signing with no key (a key longer than the block would be hashed first).
  if (secret.size() != kSecretBytes) std::abort();
  unsigned char ipad[SHA256_CBLOCK], opad[SHA256_CBLOCK];
  for (size_t i = 0; i < SHA256_CBLOCK; ++i) {
    const auto k = static_cast<unsigned char>(i < secret.size() ? secret[i] : 0);
    ipad[i] = k ^ 0x36;
    opad[i] = k ^ 0x5c;
  }
  auto keyed = std::make_unique<Keyed>();
  if (SHA256_Init(&keyed->inner) != 1 || SHA256_Update(&keyed->inner, ipad, sizeof ipad) != 1 ||
      SHA256_Init(&keyed->outer) != 1 || SHA256_Update(&keyed->outer, opad, sizeof opad) != 1) {
    std::abort();  // OpenSSL without SHA-256: nothing to sign with
  }
  OPENSSL_cleanse(ipad, sizeof ipad);
  OPENSSL_cleanse(opad, sizeof opad);
  keyed_ = std::move(keyed);
}

ReceiptSigner::~ReceiptSigner() {
  if (keyed_) OPENSSL_cleanse(const_cast<Keyed*>(keyed_.get()), sizeof(Keyed));
}

uint64_t ReceiptSigner::Tag(std::string_view queue, const Receipt& receipt) const {
  // queue, a NUL (no queue name holds one), then the id and the token as fixed-width bytes.
  unsigned char fixed[1 + 16 + 16];
  fixed[0] = 0;
  const std::string_view id = receipt.id.Raw();
  for (size_t i = 0; i < 16; ++i) fixed[1 + i] = static_cast<unsigned char>(id[i]);
  for (int i = 0; i < 8; ++i) {
    fixed[17 + i] = static_cast<unsigned char>(receipt.token.hi >> (56 - 8 * i));
    fixed[25 + i] = static_cast<unsigned char>(receipt.token.lo >> (56 - 8 * i));
  }
  unsigned char inner_digest[SHA256_DIGEST_LENGTH], mac[SHA256_DIGEST_LENGTH];
  SHA256_CTX ctx = keyed_->inner;
  SHA256_Update(&ctx, queue.data(), queue.size());
  SHA256_Update(&ctx, fixed, sizeof fixed);
  SHA256_Final(inner_digest, &ctx);
  ctx = keyed_->outer;
  SHA256_Update(&ctx, inner_digest, sizeof inner_digest);
  SHA256_Final(mac, &ctx);
  uint64_t tag = 0;
  for (int i = 0; i < 8; ++i) tag = (tag << 8) | mac[i];
  return tag;
}

std::string ReceiptSigner::Issue(std::string_view queue, const Receipt& receipt) const {
  std::string out = receipt.ToString();
  out.push_back('.');
  AppendHex64(out, Tag(queue, receipt));
  return out;
}

Result<Receipt> ReceiptSigner::Open(std::string_view queue, std::string_view text) const {
  return Open(queue, text, Receipt::Parse(text));
}

Result<Receipt> ReceiptSigner::Open(std::string_view queue, std::string_view text,
                                    const Result<Receipt>& parsed) const {
  if (!parsed.ok()) return parsed.status();
  // Compared in full, not byte by byte with an early exit (the tag is a MAC).
  if (!parsed->tag || (*parsed->tag ^ Tag(queue, *parsed)) != 0) {
    return Status::InvalidArgument(
        fmt::format("receipt \"{}\" was not issued for a delivery from queue \"{}\"; use the receipt field of "
                    "a job reserved from this queue as is",
                    text.substr(0, 80), queue.substr(0, 200)));
  }
  return parsed;
}

}  // namespace delayq
