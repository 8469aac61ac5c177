// The stored form of a schedule: every field round-trips, truncations and damage are refused, and
// a newer version is refused by name (schedule/schedule_store.h, core/record.h's rules).
#include <gtest/gtest.h>

#include "schedule/schedule_store.h"

namespace delayq {
namespace {

StoredSchedule Full() {
  StoredSchedule s;
  s.queue = "q";
  s.spec.name = "nightly";
  s.spec.cron = "0 3 * * *";
  s.spec.timezone = "Europe/Berlin";
  s.spec.payload = std::string("\x00\xff", 2);
  s.spec.binary = true;
  s.spec.headers = {{"a", "1"}, {"b", ""}};
  s.spec.max_attempts = 7;
  s.spec.misfire = Misfire::kRunAll;
  s.spec.start_at_ms = -5;  // before 1970: times are signed
  s.spec.end_at_ms = 4'000'000'000'000;
  s.state.paused = true;
  s.state.created_at_ms = 1;
  s.state.updated_at_ms = 2;
  s.state.handled_until_ms = 3;
  s.state.last_run_at_ms = 4;
  s.state.pending = {10, 20, 30};
  return s;
}

TEST(ScheduleRecord, EveryFieldRoundTrips) {
  const StoredSchedule s = Full();
  StoredSchedule back;
  ASSERT_TRUE(DecodeSchedule(EncodeSchedule(s), &back).ok());
  EXPECT_EQ(back.spec, s.spec);
  EXPECT_EQ(back.state.paused, true);
  EXPECT_EQ(back.state.created_at_ms, 1);
  EXPECT_EQ(back.state.updated_at_ms, 2);
  EXPECT_EQ(back.state.handled_until_ms, 3);
  EXPECT_EQ(back.state.last_run_at_ms, 4);
  EXPECT_EQ(back.state.pending, (std::vector<int64_t>{10, 20, 30}));

  StoredSchedule every;
  every.spec.name = "tick";
  every.spec.every_ms = 90'000;
  ASSERT_TRUE(DecodeSchedule(EncodeSchedule(every), &back).ok());
  EXPECT_EQ(back.spec, every.spec);
  EXPECT_FALSE(back.spec.max_attempts);
  EXPECT_FALSE(back.spec.start_at_ms);
}

// The bytes of version 1, pinned: an every-60s schedule "t", payload null, no headers.
TEST(ScheduleRecord, VersionOneBytesArePinnedAndNewerOnesRefused) {
  StoredSchedule s;
  s.spec.name = "t";
  s.spec.every_ms = 60'000;
  const std::string bytes = EncodeSchedule(s);
  const std::string pinned("\x01\x01t\x00\xe0\xd4\x03\x03UTC\x04null\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00", 27);
  EXPECT_EQ(bytes, pinned);
  StoredSchedule back;
  ASSERT_TRUE(DecodeSchedule(pinned, &back).ok());
  EXPECT_EQ(back.spec, s.spec);
  for (size_t cut = 0; cut < pinned.size(); ++cut) {
    EXPECT_EQ(DecodeSchedule(pinned.substr(0, cut), &back).code(), Code::kCorruption) << cut;
  }
  EXPECT_EQ(DecodeSchedule(pinned + "x", &back).code(), Code::kCorruption) << "trailing bytes";
  std::string newer = pinned;
  newer[0] = '\x03';
  auto refused = DecodeSchedule(newer, &back);
  EXPECT_EQ(refused.code(), Code::kCorruption);
  EXPECT_NE(refused.message().find("newer than this delayq understands"), std::string::npos);
  std::string bad_misfire = pinned;
  bad_misfire[20] = '\x09';  // the misfire byte
  EXPECT_EQ(DecodeSchedule(bad_misfire, &back).code(), Code::kCorruption);
}

// Version 2 (written only with a priority or a group): version 1's bytes, then the priority and
// the group; version 1 is still written without them, so a delayq from before reads it.
TEST(ScheduleRecord, VersionTwoCarriesThePriorityAndGroupAfterVersionOne) {
  StoredSchedule s;
  s.spec.name = "t";
  s.spec.every_ms = 60'000;
  s.spec.priority = 7;
  s.spec.group = "g1";
  const std::string bytes = EncodeSchedule(s);
  const std::string pinned(
      "\x02\x01t\x00\xe0\xd4\x03\x03UTC\x04null\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07\x02g1\x00", 32);
  EXPECT_EQ(bytes, pinned);
  StoredSchedule back;
  ASSERT_TRUE(DecodeSchedule(pinned, &back).ok());
  EXPECT_EQ(back.spec, s.spec);
  for (size_t cut = 0; cut < pinned.size(); ++cut) {
    EXPECT_EQ(DecodeSchedule(pinned.substr(0, cut), &back).code(), Code::kCorruption) << cut;
  }
  std::string bad_priority = pinned;
  bad_priority[27] = '\x0a';  // 10
  EXPECT_EQ(DecodeSchedule(bad_priority, &back).code(), Code::kCorruption);
  // Runs to cancel alone make a version-2 record too, and round-trip.
  StoredSchedule cancelling;
  cancelling.spec.name = "c";
  cancelling.spec.every_ms = 1'000;
  cancelling.state.cancelling = {5'000, -7, 9'000};
  const std::string c = EncodeSchedule(cancelling);
  EXPECT_EQ(c[0], '\x02');
  ASSERT_TRUE(DecodeSchedule(c, &back).ok());
  EXPECT_EQ(back.state.cancelling, cancelling.state.cancelling);
  // A version-1 record read after a version-2 one has neither.
  ASSERT_TRUE(DecodeSchedule(EncodeSchedule(StoredSchedule{}), &back).ok());
  EXPECT_EQ(back.spec.priority, 0);
  EXPECT_EQ(back.spec.group, "");
  EXPECT_TRUE(back.state.cancelling.empty());
}

}  // namespace
}  // namespace delayq
