// Receipts: 128-bit tokens from the OS CSPRNG, one spelling per token, older 64-bit ones still
// read.
#include "core/receipt.h"

#include <gtest/gtest.h>

#include <set>

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

}  // namespace
}  // namespace delayq
