// The rules the Redis store keeps twice, in C++ and in its Lua scripts, checked against each
// other: the job meta format (both versions), the back-off formula, the lateness buckets, the
// flow-control token bucket; and the key routing every server must agree on (CRC16, and the
// std::hash of queues made before).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "core/backoff.h"
#include "core/flow_control.h"
#include "core/ready_order.h"
#include "core/record.h"
#include "core/ulid.h"
#include "store/redis/redis_fixture.h"
#include "store/redis/redis_meta.h"
#include "store/redis/redis_queue.h"
#include "store/redis/scripts.h"

namespace delayq::testing {
namespace {

RedisServer& TwinsRedis() {
  static RedisServer server;
  return server;
}

std::unique_ptr<redis::RedisQueue> OpenStore(int shards = 1) {
  redis::RedisQueueOptions o;
  o.url = TwinsRedis().url();
  o.shards = shards;
  auto q = redis::RedisQueue::Open(o);
  if (!q.ok()) throw std::runtime_error(q.status().ToString());
  return std::move(*q);
}

std::string UniqueQueue(const std::string& base) {
  static int n = 0;
  return fmt::format("twins.{}.{}.{}", base, ::getpid(), n++);
}

EnqueueRequest Keyed(std::string key) {
  EnqueueRequest r;
  r.payload = "1";
  r.key = std::move(key);
  r.when.delay_ms = 600'000;
  return r;
}

redis::Value MustCall(redis::RedisQueue& q, const std::vector<std::string>& argv) {
  auto v = q.client().Call(argv.size() > 1 ? argv[1] : "", argv);
  if (!v.ok()) throw std::runtime_error(v.status().ToString());
  return *v;
}

// ------------------------------------------------------------------------------------------
// The meta format

TEST(RedisMeta, BothFormatsParseAndTheNewOneIsWritten) {
  auto v1 = redis::ParseMeta("r|1767225600000|1|2|5|abcd|1700000000000-0|1|my|key");
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->format, 1);
  EXPECT_EQ(v1->state, 'r');
  EXPECT_EQ(v1->due, 1767225600000);
  EXPECT_EQ(v1->base, 1);
  EXPECT_EQ(v1->attempt, 2);
  EXPECT_EQ(v1->max, 5);
  EXPECT_EQ(v1->delivery, "abcd");
  EXPECT_EQ(v1->sid, "1700000000000-0");
  EXPECT_TRUE(v1->key_indexed);
  EXPECT_EQ(v1->key, "my|key");

  const std::string v2_text = "2|r|1767225600000|1|2|5|abcd|1700000000000-0|1|my|key";
  auto v2 = redis::ParseMeta(v2_text);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->format, 2);
  EXPECT_EQ(v2->key, "my|key");
  EXPECT_EQ(redis::FormatMeta(*v2), v2_text);
  EXPECT_EQ(redis::FormatMeta(*v1), v2_text) << "format 1 is written back as format 2";

  EXPECT_EQ(redis::ParseMeta("5|r|1|0|0|1|0|-|0|").code(), Code::kUnavailable);
  EXPECT_EQ(redis::ParseMeta("r|x|0|0|1|0|-|0|").code(), Code::kCorruption);
  EXPECT_EQ(redis::ParseMeta("r|1|0|0").code(), Code::kCorruption);
  EXPECT_EQ(redis::ParseMeta("").code(), Code::kCorruption);
}

// Format 4 is a job's one entry: a format 2 or 3 meta, length first, then the record (any bytes).
TEST(RedisMeta, FormatFourHoldsTheMetaAndTheRecord) {
  const std::string inner = "3|q|1767225600000|0|0|5|0|L|1|7|5|a|b|cmy|key";
  const std::string record = std::string("rec|4|\0ord", 11);
  const std::string text = "4|" + std::to_string(inner.size()) + "|" + inner + record;
  auto m = redis::ParseMeta(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->has_record);
  EXPECT_EQ(m->record, record);
  EXPECT_EQ(m->group, "a|b|c");
  EXPECT_EQ(m->key, "my|key");
  EXPECT_EQ(redis::FormatMeta(*m), text);
  m->has_record = false;
  EXPECT_EQ(redis::FormatMeta(*m), inner) << "a job whose record is in dq:{q}:jobs keeps format 3";
  auto empty = redis::ParseMeta("4|18|2|s|1|0|0|5|0|-|0|");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->has_record);
  EXPECT_EQ(empty->record, "");
  for (const char* bad :
       {"4|", "4||2|s|1|0|0|5|0|-|0|", "4|19|2|s|1|0|0|5|0|-|0|", "4|x|2|s|1|0|0|5|0|-|0|", "4|18|4|s|1|0|0|5|0|-|0|",
        "4|-1|2|s|1|0|0|5|0|-|0|", "4|r|1|0|0|1|0|-|0|", "4|99999999999999999999|2|s|1|0|0|5|0|-|0|"}) {
    EXPECT_EQ(redis::ParseMeta(bad).code(), Code::kCorruption) << bad;
  }
}

// Format 3 carries a priority and a group (length-prefixed: any bytes) before the key; it is
// written only for a job with one of them, so the others stay format 2.
TEST(RedisMeta, FormatThreeCarriesThePriorityAndTheGroup) {
  const std::string text = "3|q|1767225600000|0|0|5|0|L|1|7|5|a|b|cmy|key";
  auto m = redis::ParseMeta(text);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format, 3);
  EXPECT_EQ(m->sid, "L");
  EXPECT_EQ(m->priority, 7);
  EXPECT_EQ(m->group, "a|b|c");
  EXPECT_EQ(m->key, "my|key");
  EXPECT_EQ(redis::FormatMeta(*m), text);
  m->priority = 0;
  m->group.clear();
  EXPECT_EQ(redis::FormatMeta(*m).rfind("2|q|", 0), 0u) << "no priority or group: format 2";
  EXPECT_EQ(redis::ParseMeta("3|q|1|0|0|5|0|L|1|7|9|abc").code(), Code::kCorruption)
      << "the group is longer than the rest";
  EXPECT_EQ(redis::ParseMeta("3|q|1|0|0|5|0|L|1|12|1|a").code(), Code::kCorruption) << "priority 12";
  EXPECT_EQ(redis::ParseMeta("3|q|1|0|0|5|0|L|1|7").code(), Code::kCorruption);
}

// The scripts' meta_str and meta_parse agree with FormatMeta and ParseMeta on format 3 (a change
// to one side without the other fails here).
TEST(RedisMeta, TheScriptsWriteAndReadFormatThreeAsTheCppSideDoes) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("v3");
  EnqueueRequest r;
  r.payload = "1";
  r.priority = 4;
  r.group = "te|nant";
  r.key = "k|1";
  auto job = q->Enqueue(queue, r);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string meta_key = "dq:{" + queue + "}:meta";
  const std::string written = MustCall(*q, {"HGET", meta_key, job->id}).str;
  auto parsed = redis::ParseMeta(written);
  ASSERT_TRUE(parsed.ok()) << written;
  EXPECT_EQ(parsed->format, 3);
  EXPECT_EQ(parsed->priority, 4);
  EXPECT_EQ(parsed->group, "te|nant");
  EXPECT_EQ(parsed->key, "k|1");
  EXPECT_EQ(redis::FormatMeta(*parsed), written);
  auto got = q->Get(queue, JobRef::ByKey("k|1"));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->priority, 4);
  EXPECT_EQ(got->group, "te|nant");
  EXPECT_EQ(got->state, JobState::kReady);
  auto delivered = q->Reserve(queue, {});
  ASSERT_TRUE(delivered.ok() && delivered->size() == 1u) << delivered.status().ToString();
  EXPECT_EQ((*delivered)[0].group, "te|nant");
  EXPECT_EQ((*delivered)[0].priority, 4);
  EXPECT_TRUE(q->Ack(queue, (*delivered)[0].receipt).ok());
}

// A job's record (in its format 4 meta) does not repeat its queue (the key's) or its key (the
// meta's), and every reader still shows both; a record written with them (an older delayq, in
// dq:{q}:jobs beside a format 2 meta) reads the same, and a format 4 value the C++ side packs is
// what the scripts read.
TEST(RedisMeta, ARecordKeepsNeitherItsQueueNorItsKey) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("lean");
  EnqueueRequest r = Keyed("order-12345-timeout");
  r.when.delay_ms = std::nullopt;
  r.payload = R"({"order":12345})";
  auto job = q->Enqueue(queue, r);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string jobs_key = "dq:{" + queue + "}:jobs";
  const std::string meta_key = "dq:{" + queue + "}:meta";
  EXPECT_TRUE(MustCall(*q, {"HGET", jobs_key, job->id}).is_nil()) << "the record is in the meta";
  auto meta = redis::ParseMeta(MustCall(*q, {"HGET", meta_key, job->id}).str);
  ASSERT_TRUE(meta.ok() && meta->has_record) << meta.status().ToString();
  JobRecord record;
  ASSERT_TRUE(DecodeJobRecord(meta->record, &record).ok());
  EXPECT_EQ(record.queue, "");
  EXPECT_EQ(record.key, "");
  EXPECT_EQ(record.payload, r.payload);
  auto shown = [&](const char* when) {
    auto got = q->Get(queue, JobRef::ByKey("order-12345-timeout"));
    ASSERT_TRUE(got.ok()) << when << ": " << got.status().ToString();
    EXPECT_EQ(got->queue, queue) << when;
    EXPECT_EQ(got->key, "order-12345-timeout") << when;
    EXPECT_EQ(got->payload, r.payload) << when;
  };
  shown("lean");
  record.queue = queue;  // as an older delayq wrote it: in dq:{q}:jobs, the meta format 2
  record.key = "order-12345-timeout";
  meta->has_record = false;
  MustCall(*q, {"HSET", jobs_key, job->id, EncodeJobRecord(record)});
  MustCall(*q, {"HSET", meta_key, job->id, redis::FormatMeta(*meta)});
  shown("with both");
  record.queue.clear();  // packed by the C++ twin, its record changed: what the scripts read
  record.payload = R"({"order":12346})";
  r.payload = record.payload;
  meta->has_record = true;
  meta->record = EncodeJobRecord(record);
  MustCall(*q, {"HSET", meta_key, job->id, redis::FormatMeta(*meta)});
  MustCall(*q, {"HDEL", jobs_key, job->id});
  shown("packed by C++");
  auto delivered = q->Reserve(queue, {});
  ASSERT_TRUE(delivered.ok() && delivered->size() == 1u) << delivered.status().ToString();
  EXPECT_EQ((*delivered)[0].key, "order-12345-timeout");
  EXPECT_EQ((*delivered)[0].payload, r.payload);
  EXPECT_TRUE(q->Ack(queue, (*delivered)[0].receipt).ok());
}

// A job whose meta is still in format 1 (written by delayq 0.1) is read by every script and by
// Get, and written back in format 2 by its next transition.
TEST(RedisMeta, TheScriptsReadFormatOneAndWriteFormatTwo) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("v1");
  EnqueueRequest r;
  r.payload = "1";
  auto job = q->Enqueue(queue, r);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const std::string meta_key = "dq:{" + queue + "}:meta";
  auto written = redis::ParseMeta(MustCall(*q, {"HGET", meta_key, job->id}).str);
  ASSERT_TRUE(written.ok() && written->has_record) << written.status().ToString();
  MustCall(*q, {"HSET", "dq:{" + queue + "}:jobs", job->id, written->record});  // as delayq 0.1 wrote it
  written->has_record = false;
  const std::string v2 = redis::FormatMeta(*written);
  ASSERT_EQ(v2.rfind("2|", 0), 0u) << v2;
  MustCall(*q, {"HSET", meta_key, job->id, v2.substr(2)});

  auto got = q->Get(queue, JobRef::ById(job->id));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->state, JobState::kReady);
  auto delivered = q->Reserve(queue, {});
  ASSERT_TRUE(delivered.ok() && delivered->size() == 1u) << delivered.status().ToString();
  EXPECT_EQ((*delivered)[0].payload, "1");
  EXPECT_EQ(MustCall(*q, {"HGET", meta_key, job->id}).str.rfind("2|r|", 0), 0u);
  EXPECT_TRUE(q->Ack(queue, (*delivered)[0].receipt).ok());
}

// A job is one hash field (its format 4 meta with its record) through its life: made, delivered,
// retried, delivered again with a priority, kept completed with its result (the field moves to
// dq:{q}:donemeta), replayed from dead. Nothing is ever written to dq:{q}:jobs.
TEST(RedisMeta, AJobIsOneHashFieldThroughItsLife) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("one");
  QueueConfig config;
  config.keep_completed_ms = 3'600'000;
  ASSERT_TRUE(q->SetConfig(queue, config).ok());
  const std::string prefix = "dq:{" + queue + "}:";
  auto one_field = [&](const char* when, const char* hash, const std::string& id) {
    EXPECT_EQ(MustCall(*q, {"EXISTS", prefix + "jobs"}).AsInt(), 0) << when;
    auto meta = redis::ParseMeta(MustCall(*q, {"HGET", prefix + hash, id}).str);
    ASSERT_TRUE(meta.ok()) << when << ": " << meta.status().ToString();
    EXPECT_TRUE(meta->has_record) << when;
    JobRecord record;
    EXPECT_TRUE(DecodeJobRecord(meta->record, &record).ok()) << when;
    EXPECT_EQ(record.payload, R"({"n":1})") << when;
  };
  EnqueueRequest r = Keyed("life");
  r.payload = R"({"n":1})";
  r.when.delay_ms = std::nullopt;
  r.max_attempts = 2;
  auto job = q->Enqueue(queue, r);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  one_field("made", "meta", job->id);
  auto first = q->Reserve(queue, {});
  ASSERT_TRUE(first.ok() && first->size() == 1u);
  one_field("reserved", "meta", job->id);
  NackRequest nack;
  nack.receipt = (*first)[0].receipt;
  nack.retry_in_ms = 0;
  ASSERT_TRUE(q->Nack(queue, nack).ok());
  one_field("retried", "meta", job->id);
  auto second = q->Reserve(queue, {});
  ASSERT_TRUE(second.ok() && second->size() == 1u);
  EXPECT_EQ((*second)[0].payload, r.payload);
  AckRequest ack;
  ack.receipt = (*second)[0].receipt;
  ack.result = R"({"ok":true})";
  ASSERT_TRUE(q->Ack(queue, ack).ok());
  one_field("completed", "donemeta", job->id);
  auto done = q->Get(queue, JobRef::ById(job->id));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(done->payload, r.payload);

  r.key = "dies";
  r.max_attempts = 1;
  r.priority = 5;
  auto dying = q->Enqueue(queue, r);
  ASSERT_TRUE(dying.ok()) << dying.status().ToString();
  auto last = q->Reserve(queue, {});
  ASSERT_TRUE(last.ok() && last->size() == 1u);
  nack.receipt = (*last)[0].receipt;
  ASSERT_TRUE(q->Nack(queue, nack).ok());
  one_field("dead", "meta", dying->id);
  ASSERT_TRUE(q->ReplayDead(queue, {}).ok());
  one_field("replayed", "meta", dying->id);
  auto again = q->Reserve(queue, {});
  ASSERT_TRUE(again.ok() && again->size() == 1u);
  EXPECT_EQ((*again)[0].priority, 5);
  EXPECT_EQ((*again)[0].payload, r.payload);
}

// A record over kRecordInMetaMaxBytes stays in dq:{q}:jobs beside a format 2 meta (every
// transition rewrites the meta: a 1 MB record was copied by each promote and touch, taking
// milliseconds of Redis per job); replacing moves a job's record between the two places by its
// new size, and nothing is left behind when it goes.
TEST(RedisMeta, ARecordOverTheInlineBoundStaysInTheJobsHash) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("big");
  const std::string meta_key = "dq:{" + queue + "}:meta";
  const std::string jobs_key = "dq:{" + queue + "}:jobs";
  const std::string big = "\"" + std::string(redis::kRecordInMetaMaxBytes, 'b') + "\"";
  EnqueueRequest r = Keyed("moves");
  r.when.delay_ms = std::nullopt;
  r.payload = big;
  auto job = q->Enqueue(queue, r);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  auto where = [&](const char* when) {
    auto meta = redis::ParseMeta(MustCall(*q, {"HGET", meta_key, job->id}).str);
    if (!meta.ok()) {
      ADD_FAILURE() << when << ": " << meta.status().ToString();
      return std::string();
    }
    const bool in_jobs = !MustCall(*q, {"HGET", jobs_key, job->id}).is_nil();
    EXPECT_NE(meta->has_record, in_jobs) << when << ": the record is in exactly one place";
    return std::string(meta->has_record ? "meta" : "jobs");
  };
  EXPECT_EQ(where("big"), "jobs");
  r.replace = true;
  r.payload = "1";
  ASSERT_TRUE(q->Enqueue(queue, r).ok());
  EXPECT_EQ(where("replaced by a small one"), "meta");
  r.payload = big;
  ASSERT_TRUE(q->Enqueue(queue, r).ok());
  EXPECT_EQ(where("replaced by a big one"), "jobs");
  auto got = q->Get(queue, JobRef::ById(job->id));
  ASSERT_TRUE(got.ok() && got->payload == big) << got.status().ToString();
  ReserveRequest one;
  one.max = 10;
  one.max_bytes = 100;  // the first job always comes, whatever its size
  auto delivered = q->Reserve(queue, one);
  ASSERT_TRUE(delivered.ok() && delivered->size() == 1u) << delivered.status().ToString();
  EXPECT_EQ((*delivered)[0].payload, big);
  EXPECT_EQ(where("reserved"), "jobs");
  QueueConfig keep;  // kept completed: its record stays in dq:{q}:jobs, shown and swept from there
  keep.keep_completed_ms = 3'600'000;
  ASSERT_TRUE(q->SetConfig(queue, keep).ok());
  ASSERT_TRUE(q->Ack(queue, (*delivered)[0].receipt).ok());
  auto done = q->Get(queue, JobRef::ById(job->id));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->state, JobState::kCompleted);
  EXPECT_EQ(done->payload, big);
  ListRequest completed;
  completed.state = JobState::kCompleted;
  auto listed = q->ListJobs(queue, completed);
  ASSERT_TRUE(listed.ok() && listed->jobs.size() == 1u) << listed.status().ToString();
  EXPECT_EQ(listed->jobs[0].payload, big);
  ASSERT_TRUE(q->Cancel(queue, JobRef::ById(job->id)).ok());
  EXPECT_EQ(MustCall(*q, {"EXISTS", jobs_key}).AsInt(), 0);
  EXPECT_EQ(MustCall(*q, {"EXISTS", meta_key}).AsInt(), 0);

  // The bound is the record's size, kRecordInMetaMaxBytes itself kept in the meta.
  r.key = "bound";
  r.replace = false;
  r.payload = "\"\"";
  auto probe = q->Enqueue(queue, r);
  ASSERT_TRUE(probe.ok());
  auto small = redis::ParseMeta(MustCall(*q, {"HGET", meta_key, probe->id}).str);
  ASSERT_TRUE(small.ok() && small->has_record);
  const size_t overhead = small->record.size() - r.payload.size();  // the same for any payload of 3-4 KiB
  for (size_t record : {redis::kRecordInMetaMaxBytes, redis::kRecordInMetaMaxBytes + 1}) {
    r.key = "bound-" + std::to_string(record);
    r.payload = "\"" + std::string(record - overhead - 2 - 1, 'x') + "\"";  // a 2-byte length, not 1
    auto at = q->Enqueue(queue, r);
    ASSERT_TRUE(at.ok());
    auto m = redis::ParseMeta(MustCall(*q, {"HGET", meta_key, at->id}).str);
    ASSERT_TRUE(m.ok());
    const std::string stored = m->has_record ? m->record : MustCall(*q, {"HGET", jobs_key, at->id}).str;
    EXPECT_EQ(stored.size(), record);
    EXPECT_EQ(m->has_record, record <= redis::kRecordInMetaMaxBytes) << record;
  }
}

// A format 4 value whose length runs past its end is corrupt on both sides: a ready job's value
// made so (state q, its real stream entry) is taken for gone by the reserve, not leased and
// rewritten (the scripts read such a length as reaching the end, and moved bytes between the key
// and the record); Get and Cancel say it is corrupt.
TEST(RedisMeta, AFormatFourLengthPastTheEndIsCorruptOnBothSides) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("corrupt");
  const std::string meta_key = "dq:{" + queue + "}:meta";
  for (const std::string length : {"+1", "+4", "20 digits"}) {
    EnqueueRequest r;
    r.payload = "1";
    auto job = q->Enqueue(queue, r);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    auto meta = redis::ParseMeta(MustCall(*q, {"HGET", meta_key, job->id}).str);
    ASSERT_TRUE(meta.ok() && meta->state == 'q' && meta->sid != "-") << meta.status().ToString();
    meta->has_record = false;
    const std::string inner = redis::FormatMeta(*meta);
    const std::string n = length == "+1"   ? std::to_string(inner.size() + 1)
                          : length == "+4" ? std::to_string(inner.size() + 4)
                                           : std::string("99999999999999999999");
    const std::string bad = "4|" + n + "|" + inner + (length == "+4" ? "REC" : "");
    EXPECT_EQ(redis::ParseMeta(bad).code(), Code::kCorruption) << bad;
    MustCall(*q, {"HSET", meta_key, job->id, bad});
    auto reserved = q->Reserve(queue, {});
    ASSERT_TRUE(reserved.ok()) << bad << ": " << reserved.status().ToString();
    EXPECT_TRUE(reserved->empty()) << bad << ": leased " << (reserved->empty() ? "" : (*reserved)[0].id);
    EXPECT_EQ(MustCall(*q, {"HGET", meta_key, job->id}).str, bad) << "nothing rewrote it";
    EXPECT_EQ(q->Get(queue, JobRef::ById(job->id)).code(), Code::kCorruption) << bad;
    EXPECT_EQ(q->Cancel(queue, JobRef::ById(job->id)).code(), Code::kCorruption) << bad;
    MustCall(*q, {"HDEL", meta_key, job->id});
  }
}

// meta_parse in the scripts and ParseMeta accept the same values and read the same fields from
// them, and refuse the same ones: every format, a record that is empty or holds bars and NULs, and
// corrupt or foreign spellings (a drift here made Get show a job the scripts took for gone).
TEST(RedisMeta, TheScriptsParseEveryMetaAsParseMetaDoes) {
  auto q = OpenStore();
  const redis::Script probe = redis::ProbeScript("probe_meta", R"LUA(
local out = {}
for i, v in ipairs(ARGV) do
  local ok, m = pcall(meta_parse, v)
  if not ok then
    out[i] = 'newer'
  elseif not m then
    out[i] = 'corrupt'
  else
    local record = m.body_at and string.sub(m.v, m.body_at) or '-'
    out[i] = table.concat({ m.state, fmt(m.due), fmt(m.base), fmt(m.attempt), fmt(m.max), m.delivery, m.sid,
      m.ki, fmt(m.prio), m.grp, m.key, record }, '/')
  end
end
return out
)LUA");
  auto four = [](const std::string& inner, const std::string& record) {
    return "4|" + std::to_string(inner.size()) + "|" + inner + record;
  };
  const std::string v2 = "2|r|1767225600000|1|2|5|abcd|1700000000000-0|1|my|key";
  const std::string v3 = "3|q|1767225600000|0|0|5|0|L|1|7|5|a|b|cmy|key";
  const std::vector<std::string> values = {
      "r|1767225600000|1|2|5|abcd|1700000000000-0|1|my|key", v2, v3, four(v2, ""),
      four(v3, std::string("rec|4|\0ord", 10)), four(v2, v2), "4|18|2|s|1|0|0|5|0|-|0|",
      // corrupt or foreign
      "4|19|2|s|1|0|0|5|0|-|0|", "4|0000000000018|2|s|1|0|0|5|0|-|0|", "4|18|4|s|1|0|0|5|0|-|0|", "4||2|s", "4|",
      "4|x|2|s|1|0|0|5|0|-|0|", "4|-1|2|s|1|0|0|5|0|-|0|", four("s|1|0|0|5|0|-|0|", "rec"), four(four(v2, ""), ""),
      "04|s|1|0|0|5|0|-|0|", "02|s|1|0|0|5|0|-|0|", "1|s|1|0|0|5|0|-|0|", "3|q|1|0|0|5|0|L|1|7|9|abc",
      four("3|q|1|0|0|5|0|L|1|7|9|abc", "recordbytes"), "3|q|1|0|0|5|0|L|1|12|1|a", "2|ss|1|0|0|5|0|-|0|",
      "2|s|1|0|0|5|0|-|2|", "2|s|x|0|0|5|0|-|0|", "",
      // newer
      "5|s|1|0|0|5|0|-|0|", "12|anything"};
  auto got = q->client().Eval(probe, {"dq:{probe}:due"}, values);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_FALSE(got->is_error()) << got->str;
  ASSERT_EQ(got->array.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    auto m = redis::ParseMeta(values[i]);
    std::string want;
    if (m.code() == Code::kUnavailable) {
      want = "newer";
    } else if (!m.ok()) {
      want = "corrupt";
    } else {
      want =
          fmt::format("{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}", m->state, m->due, m->base, m->attempt, m->max, m->delivery,
                      m->sid, m->key_indexed ? 1 : 0, m->priority, m->group, m->key, m->has_record ? m->record : "-");
    }
    EXPECT_EQ(got->array[i].str, want) << "value " << i << ": " << values[i];
  }
}

// Jobs made before format 4 (a format 2 or 3 meta, the record in dq:{q}:jobs) are served as
// they were and take their record with them when they leave: acked, replaced by a keyed
// enqueue, cancelled, dead and purged; none is left behind in dq:{q}:jobs. The answer's byte cap
// counts their records as it counts a format 4 job's.
TEST(RedisMeta, JobsMadeBeforeFormatFourKeepTheirRecordsUntilTheyLeave) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("legacy");
  const std::string meta_key = "dq:{" + queue + "}:meta";
  const std::string jobs_key = "dq:{" + queue + "}:jobs";
  std::vector<std::string> ids;
  for (const char* key : {"acked", "replaced", "cancelled", "dead", "laned"}) {
    EnqueueRequest r = Keyed(key);
    r.when.delay_ms = std::nullopt;
    r.payload = std::string("\"") + std::string(200, 'x') + "\"";
    r.max_attempts = 1;
    if (std::string_view(key) == "laned") r.priority = 3;
    auto job = q->Enqueue(queue, r);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    auto meta = redis::ParseMeta(MustCall(*q, {"HGET", meta_key, job->id}).str);
    ASSERT_TRUE(meta.ok() && meta->has_record) << key;
    MustCall(*q, {"HSET", jobs_key, job->id, meta->record});
    meta->has_record = false;
    MustCall(*q, {"HSET", meta_key, job->id, redis::FormatMeta(*meta)});
    ids.push_back(job->id);
  }
  ASSERT_EQ(MustCall(*q, {"HLEN", jobs_key}).AsInt(), 5);

  ReserveRequest small;
  small.max = 10;
  small.max_bytes = 300;  // one record of ~220 bytes fits, not two
  auto first = q->Reserve(queue, small);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 1u) << "the byte cap counts a record kept in dq:{q}:jobs";
  EXPECT_EQ((*first)[0].priority, 3);
  EXPECT_EQ((*first)[0].payload.size(), 202u);
  EXPECT_TRUE(q->Ack(queue, (*first)[0].receipt).ok());

  EnqueueRequest replace = Keyed("replaced");
  replace.replace = true;
  replace.when.delay_ms = std::nullopt;
  replace.payload = "2";
  ASSERT_TRUE(q->Enqueue(queue, replace).ok());
  auto got = q->Get(queue, JobRef::ByKey("replaced"));
  ASSERT_TRUE(got.ok() && got->payload == "2") << got.status().ToString();
  ASSERT_TRUE(q->Cancel(queue, JobRef::ByKey("cancelled")).ok());

  ReserveRequest all;
  all.max = 10;
  auto rest = q->Reserve(queue, all);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  ASSERT_EQ(rest->size(), 3u);
  for (const Delivery& d : *rest) {
    if (d.key == "dead") {
      NackRequest nack;
      nack.receipt = d.receipt;
      auto nacked = q->Nack(queue, nack);  // its last attempt: dead
      ASSERT_TRUE(nacked.ok()) << nacked.status().ToString();
      EXPECT_EQ(nacked->state, JobState::kDead);
    } else {
      EXPECT_EQ(d.payload.size(), d.key == "replaced" ? 1u : 202u) << d.key;
      EXPECT_TRUE(q->Ack(queue, d.receipt).ok()) << d.key;
    }
  }
  auto dead = q->Get(queue, JobRef::ById(ids[3]));  // a dead job holds no key
  ASSERT_TRUE(dead.ok() && dead->state == JobState::kDead) << dead.status().ToString();
  EXPECT_EQ(dead->payload.size(), 202u);
  EXPECT_EQ(MustCall(*q, {"HLEN", jobs_key}).AsInt(), 1) << "only the dead job's record is left";
  auto purged = q->PurgeDead(queue);
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(MustCall(*q, {"EXISTS", jobs_key}).AsInt(), 0);
  EXPECT_EQ(MustCall(*q, {"EXISTS", meta_key}).AsInt(), 0);
}

// ------------------------------------------------------------------------------------------
// Priorities and groups: the reserve script's picks are core/ready_order.h's

// Random enqueues (plain jobs, priorities, groups), reserves and acks on one Redis queue, each
// reserve's jobs checked against ReadyOrder fed the same jobs: a change to the rule on one side
// without the other fails here. Aging changes no pick (it depends on the two clocks agreeing):
// off, or a day, which no job here waits, so that the script reads its lanes a level at a time
// (its path with aging) and must still pick as strict priorities do. Reserves of up to
// `max_reserve` jobs make the script read each source in several chunks.
void ReservesPickWhatReadyOrderPicks(int64_t aging_ms, int32_t max_reserve, unsigned seed) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("lanes");
  QueueConfig config;
  config.priority_aging_ms = aging_ms;
  config.group_max_reserved = max_reserve > 4 ? 8 : 2;
  const int64_t cap = config.group_max_reserved;
  ASSERT_TRUE(q->SetConfig(queue, config).ok());
  std::mt19937 rng(seed);
  ReadyOrder model;
  std::map<std::string, int64_t, std::less<>> leased;     // per group
  std::vector<std::pair<std::string, std::string>> held;  // receipt, group
  const std::vector<std::string> groups = {"", "", "a", "b", "c"};
  int picks = 0;
  for (int step = 0; step < 300; ++step) {
    const int op = static_cast<int>(rng() % 3);
    if (op == 0) {
      std::vector<EnqueueRequest> batch(1 + rng() % (max_reserve > 4 ? 30u : 5u));
      for (auto& r : batch) {
        r.payload = "1";
        r.group = groups[rng() % groups.size()];
        r.priority = rng() % 2 == 0 ? 0 : static_cast<int32_t>(rng() % 10);
      }
      auto made = q->EnqueueBatch(queue, batch);
      ASSERT_TRUE(made.ok()) << made.status().ToString();
      for (size_t i = 0; i < batch.size(); ++i) {
        auto id = Ulid::Parse((*made)[i].id);
        ASSERT_TRUE(id.has_value());
        model.Add(batch[i].group, batch[i].priority, {(*made)[i].due_at_ms, *id});
      }
    } else if (op == 1) {
      const int32_t max = 1 + static_cast<int32_t>(rng() % static_cast<unsigned>(max_reserve));
      auto got = q->Reserve(queue, {.max = max});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const ReadyOrderRules rules{0, [&](std::string_view g) {
                                    auto it = leased.find(g);
                                    return it != leased.end() && it->second >= cap;
                                  }};
      std::vector<std::string> want;
      while (static_cast<int32_t>(want.size()) < max) {
        auto pick = model.Peek(0, rules);
        if (!pick) break;
        model.Take(*pick);
        ++leased[pick->group];
        want.push_back(pick->key.id.ToString());
      }
      std::vector<std::string> ids;
      for (const auto& d : *got) {
        ids.push_back(d.id);
        held.emplace_back(d.receipt, d.group);
      }
      ASSERT_EQ(ids, want) << "step " << step;
      picks += static_cast<int>(ids.size());
    } else {
      for (int acks = max_reserve > 4 ? 6 : 1; acks > 0 && !held.empty(); --acks) {
        const size_t i = rng() % held.size();
        ASSERT_TRUE(q->Ack(queue, held[i].first).ok());
        --leased[held[i].second];
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }
  EXPECT_GT(picks, 100);
}

TEST(RedisLanes, TheReserveScriptPicksWhatReadyOrderPicks) { ReservesPickWhatReadyOrderPicks(0, 4, 25); }

TEST(RedisLanes, WithAgingTheScriptReadsLevelByLevelAndPicksTheSame) {
  ReservesPickWhatReadyOrderPicks(86'400'000, 4, 25);
  ReservesPickWhatReadyOrderPicks(86'400'000, 40, 26);
}

TEST(RedisLanes, BigReservesReadTheLanesInChunksAndPickTheSame) { ReservesPickWhatReadyOrderPicks(0, 40, 27); }

// ------------------------------------------------------------------------------------------
// Kept keys (key_ttl_ms)

// A kept key is "id|due|expiry" in dq:{q}:keys with its expiry in dq:{q}:kept; each ack that
// keeps a key first deletes up to two whose time ran out, so they cannot pile up (the C++ twin,
// EngineImpl::ReleaseKeyLocked, does the same).
TEST(RedisKeptKeys, AcksThatKeepAKeyDeleteTwoWhoseTimeRanOut) {
  auto q = OpenStore();
  const std::string queue = UniqueQueue("kept");
  auto ack_with_ttl = [&](const std::string& key, int64_t ttl) {
    EnqueueRequest r = Keyed(key);
    r.when.delay_ms = std::nullopt;
    r.key_ttl_ms = ttl;
    ASSERT_TRUE(q->Enqueue(queue, r).ok());
    auto got = q->Reserve(queue, {});
    ASSERT_TRUE(got.ok() && got->size() == 1u);
    ASSERT_TRUE(q->Ack(queue, (*got)[0].receipt).ok());
  };
  const std::string keys = "dq:{" + queue + "}:keys", kept = "dq:{" + queue + "}:kept";
  // Five kept for 1 ms, by one ack script (so by one `now`: none is run out for the others).
  std::vector<EnqueueRequest> batch;
  for (int i = 0; i < 5; ++i) {
    batch.push_back(Keyed("short-" + std::to_string(i)));
    batch.back().when.delay_ms = std::nullopt;
    batch.back().key_ttl_ms = 1;
  }
  ASSERT_TRUE(q->EnqueueBatch(queue, batch).ok());
  auto got = q->Reserve(queue, {.max = 5});
  ASSERT_TRUE(got.ok() && got->size() == 5u);
  std::vector<std::string> receipts;
  for (const auto& d : *got) receipts.push_back(d.receipt);
  for (const Status& st : q->AckBatch(queue, receipts)) ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(MustCall(*q, {"ZCARD", kept}).AsInt(), 5);
  const std::string value = MustCall(*q, {"HGET", keys, "short-0"}).str;
  EXPECT_EQ(std::count(value.begin(), value.end(), '|'), 2) << value;
  // Wait on Redis' clock (not a sleep): until the last short key's time ran out.
  const int64_t expiry = std::stoll(MustCall(*q, {"ZSCORE", kept, "short-4"}).str);
  for (int i = 0; i < 100'000; ++i) {
    auto t = MustCall(*q, {"TIME"});
    if (std::stoll(t.array[0].str) * 1000 + std::stoll(t.array[1].str) / 1000 >= expiry) break;
  }
  for (int i = 0; i < 3; ++i) ack_with_ttl("long-" + std::to_string(i), 600'000);
  EXPECT_EQ(MustCall(*q, {"ZCARD", kept}).AsInt(), 3) << "2 + 2 + 1 run-out keys deleted";
  EXPECT_EQ(MustCall(*q, {"HLEN", keys}).AsInt(), 3);
  EXPECT_TRUE(MustCall(*q, {"HGET", keys, "short-3"}).is_nil());
}

// Data written by a newer delayq is refused, not misread: at open (dq:format), and by a script
// or Get meeting a newer meta.
TEST(RedisMeta, ANewerFormatIsRefused) {
  RedisServer redis;
  redis::RedisQueueOptions o;
  o.url = redis.url();
  auto q = redis::RedisQueue::Open(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(MustCall(**q, {"GET", redis::kFormatKey}).str, std::to_string(redis::kMetaFormat));

  EnqueueRequest r;
  r.payload = "1";
  auto job = (*q)->Enqueue("newer", r);
  ASSERT_TRUE(job.ok());
  auto delivered = (*q)->Reserve("newer", {});
  ASSERT_TRUE(delivered.ok() && delivered->size() == 1u);
  const std::string meta = MustCall(**q, {"HGET", "dq:{newer}:meta", job->id}).str;
  MustCall(**q, {"HSET", "dq:{newer}:meta", job->id, std::to_string(redis::kMetaFormat + 1) + meta.substr(1)});
  auto got = (*q)->Get("newer", JobRef::ById(job->id));
  EXPECT_EQ(got.code(), Code::kUnavailable) << got.status().ToString();
  const Status acked = (*q)->Ack("newer", (*delivered)[0].receipt);
  EXPECT_EQ(acked.code(), Code::kUnavailable) << acked.ToString();
  EXPECT_NE(acked.message().find("newer than this delayq reads"), std::string::npos) << acked.message();

  // A Redis an older release made (format 2) is raised to this release's format when it opens, so
  // servers of the older release, which cannot read format 4, refuse it from then on.
  MustCall(**q, {"SET", redis::kFormatKey, "2"});
  auto upgraded = redis::RedisQueue::Open(o);
  ASSERT_TRUE(upgraded.ok()) << upgraded.status().ToString();
  EXPECT_EQ(MustCall(**q, {"GET", redis::kFormatKey}).str, std::to_string(redis::kMetaFormat));

  MustCall(**q, {"SET", redis::kFormatKey, std::to_string(redis::kMetaFormat + 1)});
  auto refused = redis::RedisQueue::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Code::kUnavailable);
  EXPECT_NE(refused.status().message().find("newer than this delayq reads"), std::string::npos)
      << refused.status().message();
}

// ------------------------------------------------------------------------------------------
// Key routing

// A key's shard is CRC16 of the key modulo the shards, whatever built the server: std::hash (the
// rule before) is the standard library's choice, and two servers built differently would have put
// one key on two shards (two live jobs for one key).
TEST(RedisRouting, KeysGoToTheShardTheirCrc16Names) {
  EXPECT_EQ(redis::Crc16("123456789"), 0x31C3) << "CRC16-CCITT (XModem), as Redis Cluster's";
  auto q = OpenStore(4);
  const std::string queue = UniqueQueue("crc16");
  int differs = 0;
  for (int i = 0; i < 24; ++i) {
    const std::string key = "order-" + std::to_string(i);
    ASSERT_TRUE(q->Enqueue(queue, Keyed(key)).ok());
    const int shard = redis::Crc16(key) % 4;
    differs += shard != static_cast<int>(std::hash<std::string>()(key) % 4);
    const auto holder = MustCall(*q, {"HGET", fmt::format("dq:{{{}#{}}}:keys", queue, shard), key});
    EXPECT_FALSE(holder.is_nil()) << key << " is not on shard " << shard;
  }
  EXPECT_GT(differs, 0) << "the keys must tell the two rules apart";
  EXPECT_EQ(MustCall(*q, {"HGET", "dq:{" + queue + "}:config", "key_route"}).str, "crc16");
}

// A sharded queue made before CRC16 routing has no key_route in its config: its keys stay where
// std::hash put them, so a duplicate enqueue still finds the job its key names.
TEST(RedisRouting, AShardedQueueMadeBeforeKeepsItsKeyRouting) {
  auto q = OpenStore(4);
  const std::string queue = UniqueQueue("legacy");
  MustCall(*q, {"SADD", "dq:queues", queue});
  MustCall(*q, {"HSET", "dq:{" + queue + "}:config", "shards", "4"});  // as delayq 0.1 made it
  for (int i = 0; i < 12; ++i) {
    const std::string key = "k" + std::to_string(i);
    auto first = q->Enqueue(queue, Keyed(key));
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    const int shard = static_cast<int>(std::hash<std::string>()(key) % 4);
    EXPECT_FALSE(MustCall(*q, {"HGET", fmt::format("dq:{{{}#{}}}:keys", queue, shard), key}).is_nil()) << key;
    auto again = q->Enqueue(queue, Keyed(key));
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->duplicate) << key;
    EXPECT_EQ(again->id, first->id);
    EXPECT_TRUE(q->Get(queue, JobRef::ByKey(key)).ok()) << key;
  }
  EXPECT_TRUE(MustCall(*q, {"HGET", "dq:{" + queue + "}:config", "key_route"}).is_nil());
}

// ------------------------------------------------------------------------------------------
// The scripts' arithmetic against the C++ constants and formulas

// backoff_ms in the scripts and BackoffDelayMs give the same delay for the same policy, attempt
// and random draw, over a grid reaching every clamp (no growth, the cap, full jitter, 1000
// attempts).
TEST(RedisScripts, TheLuaBackOffIsTheCppOne) {
  auto q = OpenStore();
  const redis::Script probe = redis::ProbeScript("probe_backoff", R"LUA(
local out = {}
for i = 1, #ARGV, 5 do
  out[#out + 1] = backoff_ms(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]),
                             tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]))
end
return out
)LUA");
  std::mt19937_64 rng(7);
  size_t compared = 0;
  for (int64_t base : {0, 1, 1'000, 86'400'000}) {
    for (double factor : {1.0, 1.5, 2.0, 100.0}) {
      for (int64_t max_ms : {0LL, 999LL, 3'600'000LL, 30LL * 86'400'000}) {
        std::vector<std::string> args;
        std::vector<int64_t> want;
        for (double jitter : {0.0, 0.1, 1.0}) {
          for (int attempt : {1, 2, 3, 10, 50, 1000}) {
            for (double unit : {0.0, 0.25, 0.5, 0.999999, std::uniform_real_distribution<double>(0, 1)(rng)}) {
              const BackoffPolicy p{.base_ms = base, .factor = factor, .max_ms = max_ms, .jitter = jitter};
              want.push_back(BackoffDelayMs(p, attempt, unit));
              args.insert(args.end(), {std::to_string(attempt), std::to_string(base), fmt::format("{}", factor),
                                       std::to_string(max_ms), fmt::format("{}", jitter * (2.0 * unit - 1.0))});
            }
          }
        }
        auto got = q->client().Eval(probe, {"dq:{probe}:due"}, args);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_FALSE(got->is_error()) << got->str;
        ASSERT_EQ(got->array.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(got->array[i].AsInt(), want[i])
              << "attempt " << args[5 * i] << " base " << base << " factor " << factor << " max " << max_ms
              << " jitter factor " << args[5 * i + 4];
        }
        compared += want.size();
      }
    }
  }
  EXPECT_EQ(compared, 4u * 4 * 4 * 3 * 6 * 5);
}

// The lateness buckets the scripts count in are LatenessSummary::kLatenessBucketsMs.
TEST(RedisScripts, TheLatenessBucketsAreTheCppOnes) {
  auto q = OpenStore();
  const redis::Script probe = redis::ProbeScript("probe_lateness", R"LUA(
local out = {}
for i, edge in ipairs(LATENESS_EDGES) do out[i] = tostring(edge) end
out[#out + 1] = tostring(META_FORMAT)
return out
)LUA");
  auto got = q->client().Eval(probe, {"dq:{probe}:due"}, {});
  ASSERT_TRUE(got.ok() && !got->is_error());
  std::vector<std::string> want;
  for (double edge : LatenessSummary::kLatenessBucketsMs) want.push_back(fmt::format("{}", edge));
  want.push_back(std::to_string(redis::kMetaFormat));
  ASSERT_EQ(got->array.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got->array[i].str, want[i]);
}

// The token bucket of flow control: the reserve script's token_refill and next_token_us against
// core/flow_control.cc's Allowance and NextTokenUs, step by step over a grid of rates, bursts and
// gaps, with the state stored between steps as the script stores it ('%.17g|at').
TEST(RedisScripts, TheLuaTokenBucketIsTheCppOne) {
  auto q = OpenStore();
  const redis::Script probe = redis::ProbeScript("probe_bucket", R"LUA(
-- ARGV: rate, burst, then steps of (gap_us, take); returns per step {allowed, next_token_us}
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local state, now, out = nil, 1000000000, {}
for i = 3, #ARGV, 2 do
  now = now + tonumber(ARGV[i])
  local tokens, at = token_refill(state, rate, burst, now)
  local allowed = math.min(tonumber(ARGV[i + 1]), math.floor(tokens))
  tokens = tokens - allowed
  state = string.format('%.17g|%d', tokens, at)
  out[#out + 1] = { allowed, next_token_us(tokens, at, rate) }
end
return out
)LUA");
  std::mt19937_64 rng(11);
  size_t compared = 0;
  for (double rate : {0.1, 0.5, 1.0, 3.0, 50.0, 12345.678}) {
    for (int64_t burst : {0, 1, 7, 1000}) {
      QueueConfig c;
      c.rate_per_s = rate;
      c.burst = burst;
      std::vector<std::string> args = {fmt::format("{}", rate), fmt::format("{}", EffectiveBurst(c))};
      std::vector<std::pair<int64_t, int64_t>> want;
      TokenBucket bucket;
      int64_t now = 1'000'000'000;
      for (int step = 0; step < 40; ++step) {
        const int64_t gap = step == 0 ? 0 : static_cast<int64_t>(rng() % 3'000'000);
        const int64_t take = static_cast<int64_t>(rng() % 20);
        now += gap;
        const int64_t allowed = std::min(take, Allowance(c, bucket, now, 0));
        Take(c, bucket, allowed);
        want.emplace_back(allowed, NextTokenUs(c, bucket, now));
        args.push_back(std::to_string(gap));
        args.push_back(std::to_string(take));
      }
      auto got = q->client().Eval(probe, {"dq:{probe}:due"}, args);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ASSERT_FALSE(got->is_error()) << got->str;
      ASSERT_EQ(got->array.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(got->array[i].array.size(), 2u);
        EXPECT_EQ(got->array[i].array[0].AsInt(), want[i].first)
            << "rate " << rate << " burst " << burst << " step " << i;
        EXPECT_EQ(got->array[i].array[1].AsInt(), want[i].second)
            << "rate " << rate << " burst " << burst << " step " << i;
      }
      compared += want.size();
    }
  }
  EXPECT_EQ(compared, 6u * 4 * 40);
}

// A first delivery's wait split into lateness and limit wait: the reserve script's lateness_split
// against core/flow_control.cc's SplitLateness, over due times, holds and nows around each other
// (the script says "not held" with -1 where C++ says Clock::kNever).
TEST(RedisScripts, TheLatenessSplitIsTheCppOne) {
  auto q = OpenStore();
  const redis::Script probe = redis::ProbeScript("probe_lateness_split", R"LUA(
-- ARGV: triples of (due_us, since, now); returns per triple {late, wait}
local out = {}
for i = 1, #ARGV, 3 do
  local late, wait = lateness_split(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
  out[#out + 1] = { late, wait }
end
return out
)LUA");
  const int64_t base = 1'700'000'000'000'000;  // µs, as the script sees Redis time
  std::vector<std::string> args;
  std::vector<LatenessSplit> want;
  for (int64_t due : {base - 5'000'000, base - 1, base, base + 3'000}) {
    for (int64_t since : {int64_t{-1}, base - 9'000'000, base - 5'000'000, base - 1'000, base, base + 1}) {
      for (int64_t now : {base, base + 1, base + 2'500'000}) {
        args.push_back(std::to_string(due));
        args.push_back(std::to_string(since));
        args.push_back(std::to_string(now));
        want.push_back(SplitLateness(due, since < 0 ? Clock::kNever : since, now));
      }
    }
  }
  auto got = q->client().Eval(probe, {"dq:{probe}:due"}, args);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_FALSE(got->is_error()) << got->str;
  ASSERT_EQ(got->array.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string at = "due " + args[3 * i] + " since " + args[3 * i + 1] + " now " + args[3 * i + 2];
    EXPECT_EQ(got->array[i].array[0].AsInt(), want[i].late_us) << at;
    EXPECT_EQ(got->array[i].array[1].AsInt(), want[i].limit_wait_us) << at;
  }
}

// A reserve's answer stops before the record that would take it over max_bytes, but its first job
// always comes: the reserve script's answer_fits against core/flow_control.h's AnswerFits, at and
// around the cap, with int64 extremes.
TEST(RedisScripts, TheAnswerByteCapIsTheCppOne) {
  auto q = OpenStore();
  const redis::Script probe = redis::ProbeScript("probe_answer_fits", R"LUA(
-- ARGV: quadruples of (bytes, n, max_bytes, first 1|0); returns 1 or 0 per quadruple
local out = {}
for i = 1, #ARGV, 4 do
  local fits = answer_fits(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3] == '1')
  out[#out + 1] = fits and 1 or 0
end
return out
)LUA");
  std::vector<std::string> args;
  std::vector<bool> want;
  const int64_t kMaxBytes = Limits::kMaxReserveBytes;
  for (int64_t max_bytes : {int64_t{1}, int64_t{100}, int64_t{65'536}, kMaxBytes}) {
    for (int64_t bytes : {int64_t{0}, max_bytes - 1, max_bytes}) {
      for (int64_t n : {int64_t{0}, int64_t{1}, max_bytes - bytes, max_bytes - bytes + 1, int64_t{64} << 20}) {
        for (bool first : {false, true}) {
          args.insert(args.end(),
                      {std::to_string(bytes), std::to_string(n), std::to_string(max_bytes), first ? "1" : "0"});
          want.push_back(AnswerFits(bytes, n, max_bytes, first));
        }
      }
    }
  }
  auto got = q->client().Eval(probe, {"dq:{probe}:due"}, args);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_FALSE(got->is_error()) << got->str;
  ASSERT_EQ(got->array.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got->array[i].AsInt() == 1, want[i]) << "bytes " << args[4 * i] << " n " << args[4 * i + 1] << " max "
                                                   << args[4 * i + 2] << " first " << args[4 * i + 3];
  }
}

}  // namespace
}  // namespace delayq::testing
