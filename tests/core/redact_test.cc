#include "core/redact.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

// Every form a user gave a password in, found by a hostile try of `delayq doctor` and `serve`.
TEST(RedactSecrets, MasksEveryFormOfPassword) {
  EXPECT_EQ(RedactSecrets("postgres://app:S3cret@db:5432/q"), "postgres://app:***@db:5432/q");
  EXPECT_EQ(RedactSecrets("postgres://app:S3c@ret@db/q"), "postgres://app:***@db/q") << "an unencoded @";
  EXPECT_EQ(RedactSecrets("postgres://app:a/b@db/q"), "postgres://app:***@db/q") << "an unencoded /";
  EXPECT_EQ(RedactSecrets("POSTGRES://app:S3cret@db/q"), "POSTGRES://app:***@db/q");
  EXPECT_EQ(RedactSecrets("host=db port=5432 password=S3cret dbname=q"), "host=db port=5432 password=*** dbname=q");
  EXPECT_EQ(RedactSecrets("host=db password = 'S3 cret' dbname=q"), "host=db password = *** dbname=q");
  EXPECT_EQ(RedactSecrets("postgres://db/q?PASSWORD=S3cret&sslmode=require"),
            "postgres://db/q?PASSWORD=***&sslmode=require");
  EXPECT_EQ(RedactSecrets("rediss-sentinel://:pw@h:26379/m?sentinel_password=sp"),
            "rediss-sentinel://:***@h:26379/m?sentinel_password=***");
  EXPECT_EQ(RedactSecrets("postgres://db/q?sslpassword=k"), "postgres://db/q?sslpassword=***");
}

// Found by a read-only review: '?' and '#' end no user info for libpq, '&' ends no conninfo value,
// and libpq's own errors quote what it could not parse of a password.
TEST(RedactSecrets, MasksPasswordsThatHoldDelimitersAndTheLibrarysQuotesOfThem) {
  EXPECT_EQ(RedactSecrets("postgres://u:p?ss@h/db"), "postgres://u:***@h/db");
  EXPECT_EQ(RedactSecrets("postgres://u:p#ss@h/db"), "postgres://u:***@h/db");
  EXPECT_EQ(RedactSecrets("host=h password=ab&cd dbname=q"), "host=h password=*** dbname=q");
  EXPECT_EQ(RedactSecrets("host=h password=a\\ b dbname=q"), "host=h password=*** dbname=q");
  const std::string url = "postgres://u:ab%zz@h/db";
  EXPECT_EQ(RedactSecretsIn("invalid percent-encoded token: \"ab%zz\"", url), "invalid percent-encoded token: \"***\"");
  EXPECT_EQ(RedactSecretsIn("invalid integer value \"secretpart\" for connection option \"port\"",
                            "postgres://u:secretpart/rest@h/db"),
            "invalid integer value \"***\" for connection option \"port\"");
  EXPECT_EQ(RedactSecretsIn("could not connect: a%20b or a b", "postgres://u:a%20b@h/db"),
            "could not connect: *** or ***");
  EXPECT_EQ(RedactSecretsIn("no secret here", "postgres://u@h/db"), "no secret here");
}

TEST(RedactSecrets, LeavesWhatHasNoSecretAsItWas) {
  for (const char* text : {"", "embedded", "redis://127.0.0.1:6379", "postgres://app@db/q", "host=db dbname=q",
                           "postgres://db/q?application_name=a@b", "@@@", "://", "postgres://:@"}) {
    EXPECT_EQ(RedactSecrets(text), text == std::string("postgres://:@") ? "postgres://:***@" : text) << text;
  }
}

}  // namespace
}  // namespace delayq
