// Receipts: 128-bit tokens from the OS CSPRNG, one spelling per token, older 64-bit ones still
// read.
#include "core/receipt.h"

#include "core/receipt_signer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace delayq {
namespace {

TEST(Receipt, TokensAre128RandomBitsAndRoundTrip) {
  std::set<DeliveryToken> seen;
  for (int i = 0; i < 10'000; ++i) {
    const DeliveryToken t = DeliveryToken::Random();
    EXPECT_NE(t.hi, 0u);
    EXPECT_NE(t.lo, 0u);
    EXPECT_EQ(t.Hex().size(), 32u);
    EXPECT_EQ(DeliveryToken::Parse(t.Hex()), t);
    EXPECT_TRUE(seen.insert(t).second) << "a token repeated";
  }
  const Receipt r{Ulid::Parse("01M8QM5DPMD95MBYEG6H73V5MB").value(), DeliveryToken::Random()};
  auto back = Receipt::Parse(r.ToString());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->id, r.id);
  EXPECT_EQ(back->token, r.token);
}

TEST(Receipt, OlderSixtyFourBitReceiptsStillParse) {
  auto r = Receipt::Parse("01M8QM5DPMD95MBYEG6H73V5MB.a8906686ee763945");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->token, (DeliveryToken{0, 0xa8906686ee763945}));
  EXPECT_EQ(r->ToString(), "01M8QM5DPMD95MBYEG6H73V5MB.a8906686ee763945");
}

TEST(Receipt, MalformedReceiptsAreRefusedWithAClearMessage) {
  const std::string id = "01M8QM5DPMD95MBYEG6H73V5MB";
  for (const std::string& bad :
       {std::string(""), id, id + ".", id + ".0000000000000000", id + "." + std::string(32, '0'),
        id + ".0000000000000000a8906686ee763945",  // a 64-bit token spelled long: one spelling each
        id + ".A8906686EE763945", id + ".a8906686ee76394", id + ".a8906686ee763945a",
        id + ".a8906686ee763945a8906686ee763945a", id + "-a8906686ee763945", "U" + id.substr(1) + ".a8906686ee763945",
        id + ".a8906686ee76394g"}) {
    auto r = Receipt::Parse(bad);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("is not a delayq receipt"), std::string::npos);
    }
  }
}

// The tag is HMAC-SHA256 under the store's secret, whatever OpenSSL call computes it: servers
// of two releases sharing one Redis accept each other's receipts. The expected tag is Python's
// hmac.new(bytes(range(32)), b"orders\0" + bytes(range(100, 116)) + token, sha256), first 8 bytes.
TEST(ReceiptSigner, TagsAreHmacSha256OfQueueIdAndToken) {
  std::string secret, id;
  for (int i = 0; i < 32; ++i) secret.push_back(static_cast<char>(i));
  for (int i = 100; i < 116; ++i) id.push_back(static_cast<char>(i));
  const Receipt r{.id = Ulid::FromRaw(id), .token = {0x0102030405060708, 0x1112131415161718}};
  ReceiptSigner signer(secret);
  const std::string text = signer.Issue("orders", r);
  EXPECT_EQ(text, r.ToString() + ".1a6eb645e96c003c");
  // A queue name of the longest kind: the message spans more than one SHA-256 block.
  const std::string long_queue = std::string(127, 'q') + "Z";
  EXPECT_EQ(signer.Issue(long_queue, r), r.ToString() + ".4be931cd6d8dcd08");
  EXPECT_TRUE(signer.Open(long_queue, r.ToString() + ".4be931cd6d8dcd08").ok());
  // A one-bit change anywhere in the tag, the token or the queue is refused.
  EXPECT_FALSE(signer.Open("orders", r.ToString() + ".1a6eb645e96c003d").ok());
  EXPECT_FALSE(signer.Open("orderS", text).ok());
  const Receipt flipped{.id = r.id, .token = {r.token.hi, r.token.lo ^ 1}};
  EXPECT_FALSE(signer.Open("orders", flipped.ToString() + ".1a6eb645e96c003c").ok());
  // Many threads and two signers at once: each tag is its own signer's.
  ReceiptSigner other(ReceiptSigner::NewSecret());
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (signer.Issue("orders", r) != text) ++wrong;
        if (!other.Open("orders", other.Issue("orders", r)).ok()) ++wrong;
        if (other.Open("orders", text).ok() || !signer.Open("orders", text).ok()) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace delayq

namespace delayq {
namespace {

// Each receipt points at the first one naming its delivery, whatever the spelling of the id;
// what does not parse points at itself.
TEST(Receipt, FirstOccurrencesNamesTheFirstReceiptOfEachDelivery) {
  UlidGenerator ids;
  const Receipt a{ids.Next(1000), DeliveryToken::Random(), std::nullopt};
  const Receipt b{ids.Next(1000), DeliveryToken::Random(), std::nullopt};
  const Receipt a_again{a.id, DeliveryToken::Random(), std::nullopt};  // the same job, delivered again
  std::string lower = a.ToString();
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::vector<std::string> receipts = {b.ToString(),       a.ToString(), "garbage",    lower,
                                             a_again.ToString(), "garbage",    b.ToString(), a.ToString() + ".00"};
  EXPECT_EQ(FirstOccurrences(receipts), (std::vector<size_t>{0, 1, 2, 1, 4, 5, 0, 7}));
  EXPECT_TRUE(FirstOccurrences(std::vector<std::string>{}).empty());
}

}  // namespace
}  // namespace delayq
