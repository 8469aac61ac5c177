// The conformance suite, refusals on every store: a request the store refuses creates nothing,
// not its queue (which would then count against max_queues and show in listings and metrics),
// not a schedule, not a key. Found by a hostile user on the Redis store, which made the queue of
// an enqueue before it validated the jobs: three refused enqueues under --max-queues 3 and no
// valid one could make a queue any more.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

struct BadJob {
  std::string what;
  EnqueueRequest request;
  Code code = Code::kInvalidArgument;
};

std::vector<BadJob> BadJobs() {
  std::vector<BadJob> bad;
  auto add = [&](std::string what, auto&& change, Code code = Code::kInvalidArgument) {
    EnqueueRequest r = Job(R"({"ok":1})");
    change(r);
    bad.push_back({std::move(what), std::move(r), code});
  };
  add("a group over 128 bytes", [](EnqueueRequest& r) { r.group = std::string(129, 'g'); });
  add("a negative key_ttl_ms", [](EnqueueRequest& r) {
    r.key = "k";
    r.key_ttl_ms = -1;
  });
  add("key_ttl_ms without a key", [](EnqueueRequest& r) { r.key_ttl_ms = 1000; });
  add("an empty header name", [](EnqueueRequest& r) { r.headers = {{"", "v"}}; });
  add("replace without a key", [](EnqueueRequest& r) { r.replace = true; });
  add("debounce without a key", [](EnqueueRequest& r) { r.debounce = true; });
  add(
      "a payload over max_payload", [](EnqueueRequest& r) { r.payload = std::string((1 << 20) + 1, 'x'); },
      Code::kTooLarge);
  add("an empty payload", [](EnqueueRequest& r) { r.payload.clear(); });
  add("a delay past max_delay_ms (400 days)", [](EnqueueRequest& r) { r.when.delay_ms = 400LL * 86'400'000; });
  add("a deliver_at past max_delay_ms", [](EnqueueRequest& r) { r.when.deliver_at_ms = INT64_MAX; });
  add("a negative delay", [](EnqueueRequest& r) { r.when.delay_ms = INT64_MIN; });
  add("both delay and deliver_at", [](EnqueueRequest& r) {
    r.when.delay_ms = 1;
    r.when.deliver_at_ms = 1;
  });
  add("a priority of 10", [](EnqueueRequest& r) { r.priority = 10; });
  add("a negative priority", [](EnqueueRequest& r) { r.priority = INT32_MIN; });
  add("max_attempts 0", [](EnqueueRequest& r) { r.max_attempts = 0; });
  add("a key over 512 bytes", [](EnqueueRequest& r) { r.key = std::string(513, 'k'); });
  return bad;
}

// The queue does not exist: no stats, not listed, no config of its own.
void ExpectNoQueue(Queue& q, const std::string& queue, const std::string& after) {
  EXPECT_EQ(q.Stats(queue).code(), Code::kNotFound) << "after " << after << " the queue exists";
  auto all = q.ListQueues();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_TRUE(std::none_of(all->begin(), all->end(), [&](const QueueStats& s) { return s.name == queue; }))
      << "after " << after << " the queue is listed";
}

}  // namespace

TEST_P(QueueConformance, ARefusedEnqueueCreatesNoQueue) {
  for (const BadJob& bad : BadJobs()) {
    const std::string queue = QueueName();
    auto one = q().Enqueue(queue, bad.request);
    EXPECT_EQ(one.code(), bad.code) << bad.what << ": " << one.status().ToString();
    ExpectNoQueue(q(), queue, "an enqueue with " + bad.what);
    // In a batch, after a valid job: all or nothing, and nothing made.
    std::vector<EnqueueRequest> batch = {Job(R"({"fine":1})"), bad.request};
    auto many = q().EnqueueBatch(queue, batch);
    EXPECT_EQ(many.code(), bad.code) << bad.what << " in a batch: " << many.status().ToString();
    ExpectNoQueue(q(), queue, "a batch with " + bad.what);
  }
  const std::string empty = QueueName();
  EXPECT_EQ(q().EnqueueBatch(empty, std::vector<EnqueueRequest>{}).code(), Code::kInvalidArgument);
  ExpectNoQueue(q(), empty, "an empty batch");
}

// "." and ".." are names a URL's path cannot carry: a proxy, curl or a browser takes them (and,
// as WHATWG URLs do, their %2E escapes) out of the path before delayq sees it, so such a queue
// could be made by one client and never reached by another (a hostile try of the Go client met
// "no such route: /v1/" from curl). Refused by name, before anything is made.
TEST_P(QueueConformance, AQueueNamedLikeAPathsDotSegmentIsRefused) {
  for (const std::string dots : {".", ".."}) {
    auto made = q().Enqueue(dots, Job("x"));
    EXPECT_EQ(made.code(), Code::kInvalidArgument) << dots;
    EXPECT_NE(made.status().message().find("dot segment"), std::string::npos) << made.status().ToString();
    auto all = q().ListQueues();
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_TRUE(std::none_of(all->begin(), all->end(), [&](const QueueStats& s) { return s.name == dots; }));
  }
  const std::string fine = "...";  // not a dot segment
  EXPECT_TRUE(q().Enqueue(fine + QueueName(), Job("x")).ok());
}

TEST_P(QueueConformance, ARefusedEnqueueTakesNoKey) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("other"));  // the queue exists: only the key is in question
  EnqueueRequest bad = Job("bad");
  bad.key = "order-42";
  bad.group = std::string(200, 'g');
  EXPECT_EQ(q().Enqueue(queue, bad).code(), Code::kInvalidArgument);
  EXPECT_EQ(q().Get(queue, JobRef::ByKey("order-42")).code(), Code::kNotFound);
  EnqueueRequest good = Job("good");
  good.key = "order-42";
  auto made = q().Enqueue(queue, good);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_FALSE(made->duplicate) << "the refused request left its key taken";
}

TEST_P(QueueConformance, ARefusedScheduleOrConfigCreatesNoQueue) {
  std::vector<std::pair<std::string, ScheduleSpec>> bad;
  auto add = [&](std::string what, auto&& change) {
    ScheduleSpec s;
    s.name = "nightly";
    s.every_ms = 3'600'000;
    change(s);
    bad.emplace_back(std::move(what), std::move(s));
  };
  add("a bad cron", [](ScheduleSpec& s) {
    s.every_ms = 0;
    s.cron = "61 * * * *";
  });
  add("an unknown time zone", [](ScheduleSpec& s) {
    s.every_ms = 0;
    s.cron = "0 9 * * *";
    s.timezone = "Mars/Olympus";
  });
  add("an every of 0", [](ScheduleSpec& s) { s.every_ms = 0; });
  add("a start_at of INT64_MAX", [](ScheduleSpec& s) { s.start_at_ms = INT64_MAX; });
  add("a payload over max_payload", [](ScheduleSpec& s) { s.payload = std::string((1 << 20) + 1, 'x'); });
  add("a bad name", [](ScheduleSpec& s) { s.name = "no spaces"; });
  add("a dot segment for a name", [](ScheduleSpec& s) { s.name = ".."; });
  add("a header too many", [](ScheduleSpec& s) {
    for (int i = 0; i < 70; ++i) s.headers["h" + std::to_string(i)] = "v";
  });
  for (const auto& [what, spec] : bad) {
    const std::string queue = QueueName();
    auto put = q().PutSchedule(queue, spec);
    EXPECT_FALSE(put.ok()) << what;
    ExpectNoQueue(q(), queue, "a schedule with " + what);
  }
  const std::string queue = QueueName();
  QueueConfig c;
  c.lease_ms = 10;
  EXPECT_EQ(q().SetConfig(queue, c).code(), Code::kInvalidArgument);
  ExpectNoQueue(q(), queue, "a config with lease_ms 10");
}

}  // namespace delayq::testing
