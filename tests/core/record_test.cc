#include "core/record.h"

#include <gtest/gtest.h>

namespace delayq {
namespace {

JobRecord Sample() {
  JobRecord r;
  r.queue = "orders";
  r.key = "order-42";
  r.key_indexed = true;
  r.due_at_ms = 1'767'225'600'000;
  r.created_at_ms = 1'767'225'000'000;
  r.max_attempts = 5;
  r.attempt = 2;
  r.last_error = "timeout";
  r.headers = {{"version", "2"}};
  r.payload = std::string("{\"orderId\":42}\0", 15);
  return r;
}

TEST(Record, JobRoundTrips) {
  JobRecord in = Sample(), out;
  ASSERT_TRUE(DecodeJobRecord(EncodeJobRecord(in), &out).ok());
  EXPECT_EQ(out.queue, in.queue);
  EXPECT_EQ(out.key, in.key);
  EXPECT_TRUE(out.key_indexed);
  EXPECT_FALSE(out.dead);
  EXPECT_EQ(out.due_at_ms, in.due_at_ms);
  EXPECT_EQ(out.created_at_ms, in.created_at_ms);
  EXPECT_EQ(out.attempt, 2);
  EXPECT_EQ(out.headers, in.headers);
  EXPECT_EQ(out.payload, in.payload);
}

// Version 1 bytes, written out by hand: this pins the format. If this test fails, the format
// changed; follow the rule in core/record.h instead of editing these bytes.
TEST(Record, DecodesVersion1Bytes) {
  const std::string v1 = std::string(
      "\x01"   // version
      "\x01"   // state: dead
      "\x00"   // flags
      "\x05"   // due_at_ms = 5
      "\x06"   // created_at_ms = 6
      "\x03"   // max_attempts
      "\x03"   // attempt
      "\x07"   // dead_at_ms = 7
      "\x01q"  // queue
      "\x00"   // key
      "\x03"
      "err"             // last_error
      "\x01\x01h\x01v"  // headers {h: v}
      "\x02hi",         // payload
      23);
  JobRecord r;
  ASSERT_TRUE(DecodeJobRecord(v1, &r).ok());
  EXPECT_TRUE(r.dead);
  EXPECT_EQ(r.due_at_ms, 5);
  EXPECT_EQ(r.dead_at_ms, 7);
  EXPECT_EQ(r.queue, "q");
  EXPECT_EQ(r.last_error, "err");
  EXPECT_EQ(r.headers.at("h"), "v");
  EXPECT_EQ(r.payload, "hi");
  DueRecord d;
  ASSERT_TRUE(DecodeDueRecord(std::string("\x01\x0b\x02\x00\x00\x00\x00\x00\x00\x00\x09\x0a", 12), &d).ok());
  EXPECT_EQ(d.due_ms, 11);
  EXPECT_EQ(d.attempt, 2);
  EXPECT_EQ(d.delivery, (DeliveryToken{0, 9}));  // a 64-bit token: its receipts stay valid
  EXPECT_EQ(d.lease_deadline_ms, 10);
  // Version 2 (a 128-bit token), as written since receipts came from the OS CSPRNG.
  ASSERT_TRUE(DecodeDueRecord(std::string("\x02\x0b\x02\x00\x00\x00\x00\x00\x00\x00\x09\x0a"
                                          "\x00\x00\x00\x00\x00\x00\x00\x07",
                                          20),
                              &d)
                  .ok());
  EXPECT_EQ(d.delivery, (DeliveryToken{7, 9}));
  EXPECT_EQ(d.lease_deadline_ms, 10);
}

// Version 2 is version 1 and a key_ttl_ms, written only for a job that has one: every other
// record stays version 1, which the release before key_ttl_ms reads.
TEST(Record, Version2CarriesKeyTtlAndIsWrittenOnlyWhenItIsSet) {
  JobRecord plain = Sample();
  EXPECT_EQ(EncodeJobRecord(plain)[0], 1);
  JobRecord ttl = Sample();
  ttl.key_ttl_ms = 300'000;
  const std::string bytes = EncodeJobRecord(ttl);
  EXPECT_EQ(bytes[0], 2);
  EXPECT_EQ(bytes.substr(1, bytes.size() - 4), EncodeJobRecord(plain).substr(1)) << "version 1 and a varint";
  EXPECT_EQ(bytes.substr(bytes.size() - 3), std::string("\xe0\xa7\x12", 3)) << "300000 as LEB128";
  JobRecord out;
  ASSERT_TRUE(DecodeJobRecord(bytes, &out).ok());
  EXPECT_EQ(out.key_ttl_ms, 300'000);
  EXPECT_EQ(out.payload, ttl.payload);
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(DecodeJobRecord(bytes.substr(0, n), &out).ok()) << n;
  ASSERT_TRUE(DecodeJobRecord(EncodeJobRecord(plain), &out).ok());
  EXPECT_EQ(out.key_ttl_ms, 0) << "a decoded record does not keep the ttl of the one before";
}

TEST(Record, RefusesNewerVersionsAndGarbage) {
  std::string bytes = EncodeJobRecord(Sample());
  bytes[0] = 5;
  JobRecord r;
  Status s = DecodeJobRecord(bytes, &r);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("newer"), std::string::npos);
  std::string full = EncodeJobRecord(Sample());
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(DecodeJobRecord(full.substr(0, n), &r).ok()) << n;
  }
  EXPECT_FALSE(DecodeJobRecord(full + "x", &r).ok());
  DueRecord d;
  EXPECT_FALSE(DecodeDueRecord("", &d).ok());
  EXPECT_FALSE(DecodeDueRecord("\x01\x01", &d).ok());
  std::string due = EncodeDueRecord({1, 2, DeliveryToken::Random(), 3});
  for (size_t n = 0; n < due.size(); ++n) EXPECT_FALSE(DecodeDueRecord(due.substr(0, n), &d).ok()) << n;
  due[0] = 8;
  EXPECT_NE(DecodeDueRecord(due, &d).message().find("newer than this delayq understands (7)"), std::string::npos);
  due[0] = 3;  // version 3 without the record it must carry
  EXPECT_FALSE(DecodeDueRecord(due, &d).ok());
}

// Version 3 is version 2 followed by the job's whole record (a job kept in one row); version 2
// is still what an entry without a record is, so the records of jobs kept in two rows are
// unchanged.
TEST(Record, DueVersion3CarriesTheJobRecordAfterTheDueFields) {
  DueRecord plain{11, 2, {7, 9}, 10};
  EXPECT_EQ(EncodeDueRecord(plain)[0], 2);
  const std::string record = EncodeJobRecord(Sample());
  DueRecord with = plain;
  with.record = record;
  const std::string bytes = EncodeDueRecord(with);
  EXPECT_EQ(bytes, std::string("\x03\x0b\x02\x00\x00\x00\x00\x00\x00\x00\x09\x0a\x00\x00\x00\x00\x00\x00\x00\x07", 20) +
                       record);
  DueRecord out;
  ASSERT_TRUE(DecodeDueRecord(bytes, &out).ok());
  EXPECT_EQ(out.due_ms, 11);
  EXPECT_EQ(out.attempt, 2);
  EXPECT_EQ(out.delivery, (DeliveryToken{7, 9}));
  EXPECT_EQ(out.lease_deadline_ms, 10);
  EXPECT_EQ(out.record, record);
  JobRecord job;
  ASSERT_TRUE(DecodeJobRecord(out.record, &job).ok());
  EXPECT_EQ(job.payload, Sample().payload);
  ASSERT_TRUE(DecodeDueRecord(EncodeDueRecord(plain), &out).ok());
  EXPECT_TRUE(out.record.empty()) << "a decoded entry does not keep the record of the one before";
  for (size_t n = 0; n < 21; ++n) EXPECT_FALSE(DecodeDueRecord(bytes.substr(0, n), &out).ok()) << n;
}

// A reserved job's progress makes its due entry version 6 (7 with the record inline): version 4's
// fields (a priority and group, 0 and "" when none), then the progress as bytes, then the record.
// Every other entry keeps the version an older delayq reads.
TEST(Record, AProgressIsWrittenOnlyInTheEntriesOfJobsThatReportedOne) {
  DueRecord due{11, 2, {7, 9}, 10};
  due.progress = R"({"a":1})";
  const std::string fields("\x0b\x02\x00\x00\x00\x00\x00\x00\x00\x09\x0a\x00\x00\x00\x00\x00\x00\x00\x07", 19);
  const std::string entry = EncodeDueRecord(due);
  EXPECT_EQ(entry, "\x06" + fields + std::string("\x00\x00\x07{\"a\":1}", 10)) << "priority 0, group \"\", progress";
  DueRecord back;
  ASSERT_TRUE(DecodeDueRecord(entry, &back).ok());
  EXPECT_EQ(back.progress, R"({"a":1})");
  EXPECT_EQ(back.lease_deadline_ms, 10);
  EXPECT_TRUE(back.record.empty());
  for (size_t n = 0; n < entry.size(); ++n) EXPECT_FALSE(DecodeDueRecord(entry.substr(0, n), &back).ok()) << n;
  EXPECT_FALSE(DecodeDueRecord("\x06" + fields + std::string("\x00\x00\x00", 3), &back).ok())
      << "a version 6 entry holds a progress";

  const std::string record = EncodeJobRecord(Sample());
  due.record = record;
  due.priority = 4;
  due.group = "g";
  const std::string inline_entry = EncodeDueRecord(due);
  EXPECT_EQ(inline_entry[0], 7);
  ASSERT_TRUE(DecodeDueRecord(inline_entry, &back).ok());
  EXPECT_EQ(back.progress, R"({"a":1})");
  EXPECT_EQ(back.priority, 4);
  EXPECT_EQ(back.group, "g");
  EXPECT_EQ(back.record, record);
  ASSERT_TRUE(DecodeDueRecord(EncodeDueRecord({11, 2, {7, 9}, 10}), &back).ok());
  EXPECT_TRUE(back.progress.empty()) << "a decoded entry does not keep the progress of the one before";
  EXPECT_EQ(EncodeDueRecord({11, 2, {7, 9}, 10})[0], 2) << "no progress: the version before";
}

// A priority or a group makes a job record version 3 and its due entry version 4 (5 with the
// record inline); jobs without either keep the versions an older delayq reads.
TEST(Record, APriorityOrAGroupIsWrittenOnlyForTheJobsThatHaveOne) {
  JobRecord laned = Sample();
  laned.priority = 7;
  laned.group = "tenant|42";
  const std::string bytes = EncodeJobRecord(laned);
  EXPECT_EQ(bytes[0], 3);
  EXPECT_EQ(bytes.substr(bytes.size() - 12), std::string("\x00\x07\x09tenant|42", 12))
      << "key_ttl_ms 0, priority 7, then the group as bytes";
  JobRecord out;
  ASSERT_TRUE(DecodeJobRecord(bytes, &out).ok());
  EXPECT_EQ(out.priority, 7);
  EXPECT_EQ(out.group, "tenant|42");
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(DecodeJobRecord(bytes.substr(0, n), &out).ok()) << n;
  std::string too_high = bytes;
  too_high[too_high.size() - 11] = 10;
  EXPECT_FALSE(DecodeJobRecord(too_high, &out).ok()) << "priority 10 is not a priority";
  ASSERT_TRUE(DecodeJobRecord(EncodeJobRecord(Sample()), &out).ok());
  EXPECT_EQ(out.priority, 0) << "a decoded record does not keep the lane of the one before";
  EXPECT_EQ(out.group, "");

  DueRecord due{11, 2, {7, 9}, 10};
  due.priority = 3;
  due.group = "g";
  const std::string entry = EncodeDueRecord(due);
  EXPECT_EQ(entry[0], 4);
  DueRecord back;
  ASSERT_TRUE(DecodeDueRecord(entry, &back).ok());
  EXPECT_EQ(back.priority, 3);
  EXPECT_EQ(back.group, "g");
  EXPECT_TRUE(back.record.empty());
  const std::string record = EncodeJobRecord(laned);
  due.record = record;
  const std::string inline_entry = EncodeDueRecord(due);
  EXPECT_EQ(inline_entry[0], 5);
  ASSERT_TRUE(DecodeDueRecord(inline_entry, &back).ok());
  EXPECT_EQ(back.group, "g");
  EXPECT_EQ(back.record, record);
  for (size_t n = 0; n < entry.size(); ++n) EXPECT_FALSE(DecodeDueRecord(entry.substr(0, n), &back).ok()) << n;
  ASSERT_TRUE(DecodeDueRecord(EncodeDueRecord({1, 0, {}, 0}), &back).ok());
  EXPECT_EQ(back.priority, 0);
  EXPECT_TRUE(back.group.empty());
}

// A completed job (kept by keep_completed_ms) is the only one written as version 4: version 3's
// fields (key_ttl_ms, priority, group: 0, 0 and "" when none), then its completion time and result;
// its state byte is 2. Every other record keeps the version an older delayq reads.
TEST(Record, ACompletedJobIsVersion4WithItsCompletionAndResult) {
  JobRecord done = Sample();
  done.completed = true;
  done.completed_at_ms = 300;
  done.result = R"({"ok":1})";
  const std::string bytes = EncodeJobRecord(done);
  EXPECT_EQ(bytes[0], 4);
  EXPECT_EQ(bytes[1], 2) << "the state byte";
  EXPECT_EQ(bytes.substr(bytes.size() - 14), std::string("\x00\x00\x00\xac\x02\x08{\"ok\":1}", 14))
      << "key_ttl_ms 0, priority 0, group \"\", completed_at 300, then the result as bytes";
  JobRecord out;
  ASSERT_TRUE(DecodeJobRecord(bytes, &out).ok());
  EXPECT_TRUE(out.completed);
  EXPECT_FALSE(out.dead);
  EXPECT_EQ(out.completed_at_ms, 300);
  EXPECT_EQ(out.result, R"({"ok":1})");
  EXPECT_EQ(out.payload, Sample().payload);
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(DecodeJobRecord(bytes.substr(0, n), &out).ok()) << n;
  std::string mislabelled = EncodeJobRecord(Sample());
  mislabelled[1] = 2;
  EXPECT_FALSE(DecodeJobRecord(mislabelled, &out).ok()) << "state 2 only in version 4";
  ASSERT_TRUE(DecodeJobRecord(EncodeJobRecord(Sample()), &out).ok());
  EXPECT_FALSE(out.completed);
  EXPECT_EQ(out.result, "") << "a decoded record does not keep the result of the one before";
  EXPECT_EQ(EncodeJobRecord(Sample())[0], 1) << "a job not completed keeps its version";
}

}  // namespace
}  // namespace delayq
