// The verifier must fail on histories that break a promise: each test below writes a small
// history by hand, first one that keeps every promise, then the same with one thing broken.
#include "check/verify.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace delayq::check {
namespace {

constexpr int64_t kT0 = 1'000'000'000'000;  // µs; the store's times are in ms around kT0 / 1000

// Builds a history one operation at a time; each operation takes 1 ms of checker time.
class HistoryBuilder {
 public:
  Op& Add(const std::string& op, Json args, const std::string& code, Json result, int64_t at_ms) {
    Op o;
    o.client = 1;
    o.seq = static_cast<int64_t>(h_.ops.size());
    o.op = op;
    o.queue = queue_;
    o.t0 = kT0 + at_ms * 1000;
    o.t1 = o.t0 + 1000;
    o.code = code;
    o.args = std::move(args);
    o.result = std::move(result);
    h_.ops.push_back(std::move(o));
    return h_.ops.back();
  }
  void Enqueue(const std::string& id, int64_t due_ms, int64_t at_ms, const std::string& payload = "{}") {
    Add("enqueue", {{"jobs", Json::array({{{"d", due_ms - at_ms}, {"p", payload}}})}}, "ok",
        {{"jobs", Json::array({{{"id", id}, {"due", Due(due_ms)}, {"dup", false}, {"rep", false}}})}}, at_ms);
  }
  // A reserve answered at handed_ms (store time) with one delivery.
  Op& Reserve(const std::string& id, const std::string& receipt, int attempt, int64_t due_ms, int64_t handed_ms,
              int64_t lease_ms = 1000, const std::string& payload = "{}") {
    return Add("reserve", {{"max", 1}, {"wait", 0}, {"lease", lease_ms}}, "ok",
               {{"d", Json::array({{{"id", id},
                                    {"rc", receipt},
                                    {"att", attempt},
                                    {"max", 3},
                                    {"due", Due(due_ms)},
                                    {"ld", Due(handed_ms + lease_ms)},
                                    {"key", ""},
                                    {"p", payload}}})}},
               handed_ms);
  }
  void Ack(const std::string& receipt, int64_t at_ms, const std::string& code = "ok", const std::string& result = "") {
    Add("ack", {{"rc", Json::array({receipt})}, {"res", result}}, "ok", {{"codes", Json::array({code})}}, at_ms);
  }
  void Cancel(const std::string& id, int64_t at_ms, const std::string& code = "ok") {
    Add("cancel", {{"id", id}}, code, {{"id", id}}, at_ms);
  }
  void SetQueue(std::string queue) { queue_ = std::move(queue); }
  // An enqueue of one job with a key, answered 1 ms after it was sent.
  void EnqueueKeyed(const std::string& id, const std::string& key, int64_t due_ms, int64_t at_ms) {
    Add("enqueue", {{"jobs", Json::array({{{"d", due_ms - at_ms}, {"key", key}}})}}, "ok",
        {{"jobs", Json::array({{{"id", id}, {"due", Due(due_ms)}, {"dup", false}, {"rep", false}}})}}, at_ms);
  }
  // A cancel by key sent at at_ms and answered ok at answered_ms.
  void CancelKey(const std::string& key, int64_t at_ms, int64_t answered_ms) {
    Add("cancel", {{"key", key}}, "ok", Json::object(), at_ms).t1 = kT0 + answered_ms * 1000;
  }
  static int64_t Due(int64_t ms) { return kT0 / 1000 + ms; }
  History& history() { return h_; }

 private:
  History h_;
  std::string queue_ = "q";
};

std::vector<std::string> Kinds(const Report& r) {
  std::vector<std::string> kinds;
  for (const Anomaly& a : r.anomalies) kinds.push_back(a.kind);
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

FinalState Empty() {
  FinalState f;
  f.stats["q"] = {};
  f.metrics["q"] = {};
  return f;
}

const std::string kId = "01M8QM5DPMD95MBYEG6H73V5MB";
const std::string kReceipt = kId + ".a8906686ee763945";

TEST(Verify, AJobEnqueuedDeliveredOnTimeAndAckedKeepsEveryPromise) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 100);
  b.Ack(kReceipt, 150);
  const Report r = Verify(b.history(), Empty(), {});
  EXPECT_TRUE(r.anomalies.empty()) << r.anomalies.front().what;
  EXPECT_EQ(r.jobs, 1);
  EXPECT_EQ(r.deliveries, 1);
}

TEST(Verify, AnAcknowledgedJobThatIsGoneWithoutAnAckIsLost) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  const Report r = Verify(b.history(), Empty(), {});
  EXPECT_EQ(Kinds(r), std::vector<std::string>{"lost"});
  EXPECT_EQ(r.lost, 1);
  // In a mode that loses writes by design, the loss is counted, not failed on.
  const Report tolerated = Verify(b.history(), Empty(), {.loss_expected = true});
  EXPECT_TRUE(tolerated.anomalies.empty());
  EXPECT_EQ(tolerated.loss_effects.at("lost"), 1);
}

TEST(Verify, ADeliveryWithAPayloadNoEnqueueOfItsJobGaveIsCaught) {
  const std::string other = "01M8QM5DPMD95MBYEG6H73V5MC";
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0, R"({"w":1,"n":1,"i":0})");
  b.Enqueue(other, 5000, 1, R"({"w":1,"n":2,"i":0})");
  b.Reserve(kId, kReceipt, 1, 100, 100, 1000, R"({"w":1,"n":1,"i":0})");
  b.Ack(kReceipt, 150);
  FinalState f = Empty();
  f.jobs[other] = {.found = true, .state = "scheduled"};
  f.stats["q"].scheduled = f.metrics["q"].scheduled = 1;
  const Report good = Verify(b.history(), f, {});
  EXPECT_TRUE(good.anomalies.empty()) << good.anomalies.front().what;
  // Another job's payload, and one cut short.
  for (const std::string& wrong : {std::string(R"({"w":1,"n":2,"i":0})"), std::string(R"({"w":1,"n":1)")}) {
    HistoryBuilder bad;
    bad.Enqueue(kId, 100, 0, R"({"w":1,"n":1,"i":0})");
    bad.Enqueue(other, 5000, 1, R"({"w":1,"n":2,"i":0})");
    bad.Reserve(kId, kReceipt, 1, 100, 100, 1000, wrong);
    bad.Ack(kReceipt, 150);
    EXPECT_EQ(Kinds(Verify(bad.history(), f, {})), std::vector<std::string>{"payload"}) << wrong;
  }
}

// A replace by key in doubt may have given the job holding the key its payload.
TEST(Verify, AReplaceByKeyInDoubtMayHaveGivenItsPayload) {
  HistoryBuilder b;
  b.Add("enqueue", {{"jobs", Json::array({{{"d", 100}, {"key", "k"}, {"p", "\"first\""}}})}}, "ok",
        {{"jobs", Json::array({{{"id", kId}, {"due", HistoryBuilder::Due(100)}, {"dup", false}, {"rep", false}}})}}, 0);
  b.Add("enqueue", {{"jobs", Json::array({{{"d", 100}, {"key", "k"}, {"rep", true}, {"p", "\"second\""}}})}},
        "unavailable", Json::object(), 10);
  b.Reserve(kId, kReceipt, 1, 100, 200, 1000, "\"second\"");
  b.Ack(kReceipt, 250);
  const Report r = Verify(b.history(), Empty(), {.fault_grace_us = 0});
  EXPECT_EQ(Kinds(r), std::vector<std::string>{"answered"}) << "only the 503, outside a fault";
}

// A paused queue hands out nothing until a resume is sent; a reserve sent before the pause was
// answered, or answered after the resume was sent, may.
TEST(Verify, ADeliveryFromAPausedQueueIsCaught) {
  auto run = [](int64_t reserve_at_ms, bool resume) {
    HistoryBuilder b;
    b.Enqueue(kId, 100, 0);
    b.Add("pause", Json::object(), "ok", Json::object(), 150);
    if (resume) b.Add("resume", Json::object(), "ok", Json::object(), 300).t1 = kT0 + 350'000;
    b.Reserve(kId, kReceipt, 1, 100, reserve_at_ms);
    b.Ack(kReceipt, reserve_at_ms + 10);
    return Kinds(Verify(b.history(), Empty(), {}));
  };
  EXPECT_EQ(run(200, false), std::vector<std::string>{"pause"});
  EXPECT_EQ(run(200, true), std::vector<std::string>{"pause"}) << "answered before the resume was sent";
  EXPECT_EQ(run(400, true), std::vector<std::string>{}) << "sent after a resume was sent (answered later)";
  EXPECT_EQ(run(150, false), std::vector<std::string>{}) << "sent before the pause was answered";
  // A resume that got no answer before the pause may have been carried out after it.
  HistoryBuilder late;
  late.Enqueue(kId, 100, 0);
  late.Add("resume", Json::object(), "no_answer", Json::object(), 120);
  late.Add("pause", Json::object(), "ok", Json::object(), 150);
  late.Reserve(kId, kReceipt, 1, 100, 200);
  late.Ack(kReceipt, 210);
  late.history().faults.push_back({"stop-server", kT0 + 100'000, kT0 + 300'000});
  EXPECT_EQ(Kinds(Verify(late.history(), Empty(), {})), std::vector<std::string>{});
}

// A job made by an enqueue in doubt, then named by a dedupe of its key that answered: it has the
// payload of the one in doubt, not the dedupe's.
TEST(Verify, ADedupeGivesNoPayloadAndAnEnqueueInDoubtOfTheKeyMayHave) {
  HistoryBuilder b;
  b.Add("enqueue", {{"jobs", Json::array({{{"d", 100}, {"key", "k"}, {"p", "\"first\""}}})}}, "no_answer",
        Json::object(), 0);
  b.Add("enqueue", {{"jobs", Json::array({{{"d", 100}, {"key", "k"}, {"p", "\"second\""}}})}}, "ok",
        {{"jobs", Json::array({{{"id", kId}, {"due", HistoryBuilder::Due(100)}, {"dup", true}, {"rep", false}}})}}, 10);
  b.Reserve(kId, kReceipt, 1, 100, 200, 1000, "\"first\"");
  b.Ack(kReceipt, 250);
  b.history().faults.push_back({"kill-server", kT0, kT0 + 300'000});
  const Report r = Verify(b.history(), Empty(), {});
  EXPECT_EQ(Kinds(r), std::vector<std::string>{}) << (r.anomalies.empty() ? "" : r.anomalies.front().what);
  HistoryBuilder overwrote;  // a dedupe that changed the payload
  overwrote.Enqueue(kId, 100, 0, "\"first\"");
  overwrote.Add(
      "enqueue", {{"jobs", Json::array({{{"d", 100}, {"p", "\"second\""}}})}}, "ok",
      {{"jobs", Json::array({{{"id", kId}, {"due", HistoryBuilder::Due(100)}, {"dup", true}, {"rep", false}}})}}, 10);
  overwrote.Reserve(kId, kReceipt, 1, 100, 200, 1000, "\"second\"");
  overwrote.Ack(kReceipt, 250);
  EXPECT_EQ(Kinds(Verify(overwrote.history(), Empty(), {})), std::vector<std::string>{"payload"});
}

// Found in CI (postgres_terminate_connections): a cancel by key slowed by a fault was answered
// after an enqueue of that key that was sent 12 ms after it; the cancel took the new job.
TEST(Verify, ACancelByKeyExplainsAJobEnqueuedWhileItWasUnderWay) {
  HistoryBuilder b;
  b.CancelKey("k", 0, 95);
  b.EnqueueKeyed(kId, "k", 3000, 12);
  EXPECT_TRUE(Verify(b.history(), Empty(), {}).anomalies.empty());
  // One answered before the enqueue was sent cannot have taken it.
  HistoryBuilder before;
  before.CancelKey("k", 0, 5);
  before.EnqueueKeyed(kId, "k", 3000, 12);
  EXPECT_EQ(Kinds(Verify(before.history(), Empty(), {})), std::vector<std::string>{"lost"});
}

TEST(Verify, ACancelByKeyExplainsOneGoneJobNotTwo) {
  HistoryBuilder b;
  b.EnqueueKeyed(kId, "k", 3000, 0);
  b.CancelKey("k", 10, 11);
  b.EnqueueKeyed("01M8QM5DPMD95MBYEG6H73V5MC", "k", 3000, 20);
  const Report r = Verify(b.history(), Empty(), {});
  EXPECT_EQ(Kinds(r), std::vector<std::string>{"lost"});
  EXPECT_EQ(r.lost, 1);
  b.CancelKey("k", 30, 31);
  EXPECT_TRUE(Verify(b.history(), Empty(), {}).anomalies.empty());
}

TEST(Verify, ADeliveryBeforeTheDueTimeIsEarly) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 99);
  b.Ack(kReceipt, 150);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{"early"});
}

// When the store's clock ran an hour ahead, a job that came due then stays due after the step
// back: handing it out is not early (found by make check-history's clock-step mode). The same
// delivery with no step is early.
TEST(Verify, AJobThatCameDueDuringAForwardStepIsNotEarlyAfterTheStepBack) {
  HistoryBuilder b;
  b.Enqueue(kId, 3'600'000 + 100, 50);                // enqueued during the step: due an hour ahead
  b.Reserve(kId, kReceipt, 1, 3'600'000 + 100, 200);  // handed out after the step back
  b.Ack(kReceipt, 250);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {.clock_steps = true})), std::vector<std::string>{"early"});
  b.history().faults.push_back({"clock+1h", kT0, kT0 + 199'000});
  EXPECT_TRUE(Verify(b.history(), Empty(), {.clock_steps = true}).anomalies.empty());
}

// Found by make check-history (Redis failover with --redis-wait-replicas): an enqueue answered
// 503 created its job anyway; a nack later gave the job a due time, and the first delivery's
// due time, from the enqueue in doubt, was taken for one no answer gave.
TEST(Verify, AJobCreatedByAnEnqueueInDoubtMayBeDeliveredAtTheDueTimeItAskedFor) {
  HistoryBuilder b;
  b.Add("enqueue", {{"jobs", Json::array({{{"d", 100}}})}}, "unavailable", Json(), 0);
  b.history().faults.push_back({"redis-failover", kT0 - 1000, kT0 + 2000});
  b.Reserve(kId, kReceipt, 1, 100, 100);
  b.Add("nack", {{"rc", kReceipt}, {"retry", 50}}, "ok", {{"state", "scheduled"}, {"due", HistoryBuilder::Due(200)}},
        150);
  b.Reserve(kId, kId + ".1111111111111111", 2, 200, 200);
  b.Ack(kId + ".1111111111111111", 250);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{});
}

// A delivery whose answer was lost (a server killed mid-reserve) skips an attempt; a replay
// starts the attempts again (found by make check-history with two servers on one Redis).
TEST(Verify, AttemptsMaySkipAfterAReserveInDoubtAndRestartAfterAReplay) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 100, 100);
  b.Reserve(kId, kId + ".1111111111111111", 3, 100, 400, 100);  // attempt 2 went unseen
  FinalState reserved = Empty();                                // still held at the end
  reserved.jobs[kId] = {.found = true, .state = "reserved"};
  reserved.stats["q"].reserved = reserved.metrics["q"].reserved = 1;
  EXPECT_EQ(Kinds(Verify(b.history(), reserved, {})), std::vector<std::string>{"attempts"});
  b.Add("reserve", {{"max", 1}, {"wait", 0}, {"lease", 100}}, "unavailable", Json(), 250);
  b.history().faults.push_back({"kill-server", kT0 + 249'000, kT0 + 252'000});
  EXPECT_EQ(Kinds(Verify(b.history(), reserved, {})), std::vector<std::string>{});
  b.Add("replay", {{"ids", Json::array()}}, "ok", {{"replayed", 1}}, 500);
  b.Add("reserve", {{"max", 1}, {"wait", 0}, {"lease", 100}}, "", Json(), 510).t1 = -1;
  b.Reserve(kId, kId + ".2222222222222222", 2, 500, 700, 100);  // after the replay: 1 unseen, then 2
  EXPECT_EQ(Kinds(Verify(b.history(), reserved, {.killed_clients = {1}})), std::vector<std::string>{});
}

// A replay whose client gave up waiting (the delayq server was stopped, not killed) may still be
// carried out when the server runs again: the dead job it makes due then is delivered afresh
// (found by the postgres stop-server mode: "delivered with due time ... which no answer gave it").
TEST(Verify, AReplayWhoseClientGaveUpMayTakeEffectLater) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 100);
  b.Add("nack", {{"rc", kReceipt}, {"dead", true}}, "ok", {{"state", "dead"}, {"due", HistoryBuilder::Due(100)}}, 150);
  Op& replay = b.Add("replay", {{"ids", Json::array()}}, "no_answer", Json::object(), 200);
  replay.t1 = replay.t0 + 5'000'000;  // the client waited 5 s
  b.history().faults.push_back({"stop-server", kT0 + 199'000, kT0 + 6'990'000});
  const std::string again = kId + ".2222222222222222";
  b.Reserve(kId, again, 1, 6995, 7000);
  b.Ack(again, 7100);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{});
  // An answered replay bounds when it took effect: the same delivery after it is unexplained.
  b.history().ops[3].code = "ok";
  b.history().ops[3].result = {{"n", 1}};
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{"due"});
}

// A job with one attempt, reserved by requests whose answers were lost, went dead unseen and
// was purged: not lost (found by the Redis failover mode with --redis-wait-replicas).
TEST(Verify, AJobWhoseAttemptsUnseenDeliveriesMayHaveUsedUpCanBePurged) {
  HistoryBuilder b;
  b.Add("enqueue", {{"jobs", Json::array({{{"d", 100}, {"max", 1}}})}}, "ok",
        {{"jobs", Json::array({{{"id", kId}, {"due", HistoryBuilder::Due(100)}, {"dup", false}, {"rep", false}}})}}, 0);
  b.Add("purge", Json::object(), "ok", {{"n", 1}}, 5000);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{"lost"});
  b.Add("reserve", {{"max", 1}, {"wait", 0}, {"lease", 1000}}, "unavailable", Json(), 150);
  b.history().faults.push_back({"redis-failover", kT0 + 100'000, kT0 + 200'000});
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{});
}

TEST(Verify, ASecondDeliveryWithinTheFirstLeaseIsADoubleLease) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 100, 1000);
  b.Reserve(kId, kId + ".1111111111111111", 2, 100, 600, 1000);  // the first lease lasts until 1100
  b.Ack(kId + ".1111111111111111", 700);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{"lease"});
}

// The embedded store answers a reserve before its lease is on disk: a power cut right after may
// lose the lease, and the job is handed out again (attempt 1 again) inside the first lease. That
// is counted when a power cut falls between the two deliveries, and is a "lease" anomaly
// otherwise, or on a store whose leases are durable.
TEST(Verify, ALeaseLostToAPowerCutIsCountedOnlyWhereLeasesAreNotSynced) {
  auto build = [](int64_t cut_ms) {
    HistoryBuilder b;
    b.Enqueue(kId, 100, 0);
    b.Reserve(kId, kReceipt, 1, 100, 100, 1000);
    b.history().faults.push_back({"power-cut", kT0 + cut_ms * 1000, kT0 + (cut_ms + 40) * 1000});
    b.Reserve(kId, kId + ".1111111111111111", 1, 100, 400, 1000);  // within the first lease
    b.Ack(kId + ".1111111111111111", 500);
    return b;
  };
  auto across = build(300);
  const Report counted = Verify(across.history(), Empty(), {.unsynced_leases = true});
  EXPECT_EQ(Kinds(counted), std::vector<std::string>{});
  EXPECT_EQ(counted.loss_effects.at("lease lost to a power cut"), 1);
  EXPECT_EQ(Kinds(Verify(across.history(), Empty(), {})), std::vector<std::string>{"lease"});
  auto before = build(50);  // the cut came before the first delivery: no excuse
  EXPECT_EQ(Kinds(Verify(before.history(), Empty(), {.unsynced_leases = true})), std::vector<std::string>{"lease"});
  // The first lease was answered while the fault ran (the disk slow, the power not yet gone):
  // the cut came after it. (Found: judged by the fault's start alone, this was an anomaly.)
  auto during = build(80);
  EXPECT_EQ(Kinds(Verify(during.history(), Empty(), {.unsynced_leases = true})), std::vector<std::string>{});
}

// The lost lease took its attempt with it: the next delivery counts the same attempt again
// (seen as "went from attempt 2 to attempt 2" in embedded_sync_power_cut). Excused only where
// leases are unsynced and a power cut fell between the two deliveries.
TEST(Verify, AnAttemptCountedAgainAfterALeaseLostToAPowerCutIsExcusedOnlyThere) {
  auto build = [](int64_t cut_ms) {
    HistoryBuilder b;
    b.Enqueue(kId, 100, 0);
    b.Reserve(kId, kReceipt, 1, 100, 100, 100);                    // its lease runs out at 200
    b.Reserve(kId, kId + ".2222222222222222", 2, 100, 250, 1000);  // attempt 2
    b.history().faults.push_back({"power-cut", kT0 + cut_ms * 1000, kT0 + (cut_ms + 40) * 1000});
    b.Reserve(kId, kId + ".3333333333333333", 2, 100, 400, 1000);  // attempt 2 again
    b.Ack(kId + ".3333333333333333", 500);
    return b;
  };
  auto across = build(300);
  EXPECT_EQ(Kinds(Verify(across.history(), Empty(), {.unsynced_leases = true})), std::vector<std::string>{});
  const std::vector<std::string> synced = Kinds(Verify(across.history(), Empty(), {}));
  EXPECT_NE(std::find(synced.begin(), synced.end(), "attempts"), synced.end());
  auto before = build(200);  // the cut came before attempt 2 was handed out: no excuse
  const std::vector<std::string> early = Kinds(Verify(before.history(), Empty(), {.unsynced_leases = true}));
  EXPECT_NE(std::find(early.begin(), early.end(), "attempts"), early.end());
}

TEST(Verify, AnAckWithTheReceiptOfAnOlderDeliveryThatSucceedsIsStale) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 100, 100);
  b.Reserve(kId, kId + ".1111111111111111", 2, 100, 300, 1000);  // after the first lease ran out
  b.Ack(kReceipt, 400);                                          // the old receipt: must fail
  b.Ack(kId + ".1111111111111111", 500);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{"stale"});
}

TEST(Verify, AForgedReceiptThatIsAcceptedIsStale) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 100);
  b.Add("ack", {{"rc", Json::array({kId + ".0000000000000000"})}, {"why", "forged"}}, "ok",
        {{"codes", Json::array({"ok"})}}, 120);
  const auto kinds = Kinds(Verify(b.history(), Empty(), {}));
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "stale"), kinds.end());
}

TEST(Verify, AJobDeliveredAfterItsAckAnsweredIsResurrected) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 100, 100);
  b.Ack(kReceipt, 150);
  b.Reserve(kId, kId + ".1111111111111111", 2, 100, 300);
  const auto kinds = Kinds(Verify(b.history(), Empty(), {}));
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "resurrected"), kinds.end());
}

TEST(Verify, ARequestNeverAnsweredOrAnsweredWithAnInternalErrorIsReported) {
  HistoryBuilder b;
  b.Add("stats", Json::object(), "", Json(), 0).t1 = -1;
  b.Add("stats", Json::object(), "internal", Json(), 10);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), (std::vector<std::string>{"answered", "answered"}));
  // A client killed with SIGKILL leaves its last request in doubt: that is not an anomaly.
  HistoryBuilder killed;
  killed.Add("stats", Json::object(), "", Json(), 0).t1 = -1;
  EXPECT_TRUE(Verify(killed.history(), Empty(), {.killed_clients = {1}}).anomalies.empty());
}

TEST(Verify, ServiceUnavailableIsAnAnomalyOutsideAFaultAndExpectedInside) {
  HistoryBuilder b;
  b.Add("stats", Json::object(), "unavailable", Json(), 0);
  EXPECT_EQ(Kinds(Verify(b.history(), Empty(), {})), std::vector<std::string>{"answered"});
  b.history().faults.push_back({"kill-server", kT0 - 1000, kT0 + 500});
  EXPECT_TRUE(Verify(b.history(), Empty(), {}).anomalies.empty());
}

TEST(Verify, StatsThatDisagreeWithARecountAreReported) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  FinalState f = Empty();
  f.jobs[kId] = {.found = true, .state = "scheduled"};
  f.stats["q"].scheduled = 1;
  f.metrics["q"].scheduled = 1;
  EXPECT_TRUE(Verify(b.history(), f, {}).anomalies.empty());
  f.stats["q"].dead = -1;  // a count gone negative
  f.metrics["q"].dead = -1;
  EXPECT_EQ(Kinds(Verify(b.history(), f, {})), std::vector<std::string>{"counts"});
}

TEST(Verify, TwoLiveJobsWithOneKeyAreReported) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  b.Enqueue("01M8QM5DPMD95MBYEG6H73V5MC", 100, 1);
  FinalState f = Empty();
  f.jobs[kId] = {.found = true, .state = "scheduled", .key = "k"};
  f.jobs["01M8QM5DPMD95MBYEG6H73V5MC"] = {.found = true, .state = "scheduled", .key = "k"};
  f.stats["q"].scheduled = f.metrics["q"].scheduled = 2;
  EXPECT_EQ(Kinds(Verify(b.history(), f, {})), std::vector<std::string>{"keys"});
}

}  // namespace
// A queue that keeps completed jobs (chk.b): a job acked ok may be there at the end, completed, with
// the result that ack carried; with another result, after a cancel that answered ok, or in a queue
// that keeps none, it is an anomaly.
TEST(Verify, ACompletedJobShowsTheResultOfAnAckThatWentWell) {
  HistoryBuilder b;
  b.SetQueue("chk.b");
  b.Enqueue(kId, 100, 0);
  b.Reserve(kId, kReceipt, 1, 100, 100);
  b.Ack(kReceipt, 150, "ok", R"({"c":1,"n":7})");
  auto final_with = [](const std::string& result) {
    FinalState f;
    f.stats["chk.b"] = {0, 0, 0, 0, 1};
    f.metrics["chk.b"] = {0, 0, 0, 0, 1};
    f.jobs[kId] = {true, "completed", "", 1, result};
    return f;
  };
  const Report good = Verify(b.history(), final_with(R"({"c":1,"n":7})"), {});
  EXPECT_TRUE(good.anomalies.empty()) << good.anomalies.front().what;
  EXPECT_EQ(Kinds(Verify(b.history(), final_with(R"({"c":1,"n":8})"), {})), std::vector<std::string>{"result"});
  FinalState miscounted = final_with(R"({"c":1,"n":7})");
  miscounted.stats["chk.b"].completed = 0;
  miscounted.metrics["chk.b"].completed = 0;
  EXPECT_EQ(Kinds(Verify(b.history(), miscounted, {})), std::vector<std::string>{"counts"});
  b.Cancel(kId, 200);
  EXPECT_EQ(Kinds(Verify(b.history(), final_with(R"({"c":1,"n":7})"), {})), std::vector<std::string>{"resurrected"});

  HistoryBuilder other;  // queue q keeps no completed jobs
  other.Enqueue(kId, 100, 0);
  other.Reserve(kId, kReceipt, 1, 100, 100);
  other.Ack(kReceipt, 150, "ok", R"({"c":1,"n":7})");
  FinalState f = Empty();
  f.stats["q"].completed = 1;
  f.metrics["q"].completed = 1;
  f.jobs[kId] = {true, "completed", "", 1, R"({"c":1,"n":7})"};
  EXPECT_EQ(Kinds(Verify(other.history(), f, {})), std::vector<std::string>{"result"});
}

namespace {

// A wait sent at at_ms, answered took_ms later with the job in `state` (and `result`).
void AddWait(HistoryBuilder& b, int64_t at_ms, int64_t wait_ms, int64_t took_ms, const std::string& state,
             const std::string& result = "") {
  Json r = {{"id", kId}, {"state", state}, {"att", 1}, {"key", ""}};
  if (state == "completed") r["result"] = result;
  b.Add("wait", {{"id", kId}, {"wait", wait_ms}}, "ok", r, at_ms).t1 = kT0 + (at_ms + took_ms) * 1000;
}

}  // namespace

TEST(Verify, AWaitAnswersAStateThatIsNotFinalOnlyOnceItsTimeIsUp) {
  HistoryBuilder b;
  b.Enqueue(kId, 100, 0);
  AddWait(b, 10, 50, 50, "scheduled");  // its full time
  b.Reserve(kId, kReceipt, 1, 100, 100);
  b.Ack(kReceipt, 150, "ok", "7");
  FinalState kept = Empty();  // queue q keeps nothing, but a waited job is kept for the wait
  kept.stats["q"].completed = 1;
  kept.metrics["q"].completed = 1;
  kept.jobs[kId] = {true, "completed", "", 1, "7"};
  HistoryBuilder waited = b;
  AddWait(waited, 120, 1000, 31, "completed", "7");  // answered at the ack
  const Report good = Verify(waited.history(), kept, {});
  EXPECT_TRUE(good.anomalies.empty()) << good.anomalies.front().what;

  HistoryBuilder early = b;
  AddWait(early, 10, 500, 20, "ready");  // answered after 20 of its 500 ms, the job not final
  AddWait(early, 120, 1000, 31, "completed", "7");
  EXPECT_EQ(Kinds(Verify(early.history(), kept, {})), std::vector<std::string>{"wait"});

  HistoryBuilder other_result = b;
  AddWait(other_result, 120, 1000, 31, "completed", "8");
  EXPECT_EQ(Kinds(Verify(other_result.history(), kept, {})), std::vector<std::string>{"wait"});

  HistoryBuilder uncancelled;
  uncancelled.Enqueue(kId, 100, 0);
  AddWait(uncancelled, 10, 1000, 5, "cancelled");  // no cancel was ever sent
  FinalState gone = Empty();
  gone.jobs[kId] = {false, "", "", 0, ""};
  auto kinds = Kinds(Verify(uncancelled.history(), gone, {}));
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "wait"), kinds.end());
  HistoryBuilder cancelled;
  cancelled.Enqueue(kId, 5'000, 0);
  cancelled.Cancel(kId, 8);
  AddWait(cancelled, 5, 1000, 4, "cancelled");
  const Report fine = Verify(cancelled.history(), gone, {});
  EXPECT_TRUE(fine.anomalies.empty()) << fine.anomalies.front().what;
}

// Found by the short check on Redis: a wait by key sent while the server was killed (answered 503,
// so no id) stays noted in the shared store until its end, and the job's ack keeps the job
// completed for it: a queue that keeps nothing shows it completed, which is no anomaly.
TEST(Verify, AJobKeptForAWaitByKeyThatNeverAnsweredIsNoResultAnomaly) {
  HistoryBuilder b;
  b.EnqueueKeyed(kId, "k3", 100, 0);
  b.Add("wait", {{"key", "k3"}, {"wait", 500}}, "unavailable", Json::object(), 10);
  b.Reserve(kId, kReceipt, 1, 100, 100);
  b.Ack(kReceipt, 150, "ok", "7");
  FinalState kept = Empty();
  kept.stats["q"].completed = 1;
  kept.metrics["q"].completed = 1;
  kept.jobs[kId] = {true, "completed", "k3", 1, "7"};
  const Report r = Verify(b.history(), kept, {});
  EXPECT_EQ(Kinds(r), std::vector<std::string>{"answered"}) << "the 503 outside a fault, and nothing else";
}

}  // namespace delayq::check
