// The conformance suite, W3C Trace Context on jobs (SPEC §11.3) on every store: a job's
// traceparent and tracestate, kept in its headers, come back wherever the job is shown (get by id
// and key, listings, reserve, the dead letters, a restart), a replace brings the new context, and
// a malformed one is refused before anything is created.
#include <gtest/gtest.h>

#include "conformance/helpers.h"
#include "conformance/queue_conformance.h"

namespace delayq::testing {
namespace {

const std::string kParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const std::string kOtherParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
const std::string kState = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";

EnqueueRequest Traced(const std::string& payload, const std::string& parent, const std::string& state,
                      std::optional<int64_t> delay_ms = std::nullopt) {
  EnqueueRequest r = Job(payload, delay_ms);
  r.headers["traceparent"] = parent;
  if (!state.empty()) r.headers["tracestate"] = state;
  r.headers["tenant"] = "t1";
  return r;
}

}  // namespace

TEST_P(QueueConformance, ATraceContextComesBackWhereverTheJobIsShown) {
  const std::string queue = QueueName();
  EnqueueRequest r = Traced("traced", kParent, kState, 100 * h_->unit_ms());
  r.key = "order-7";
  const EnqueueResult made = MustEnqueue(q(), queue, r);
  auto by_id = q().Get(queue, JobRef::ById(made.id));
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  EXPECT_EQ(TraceParentOf(by_id->headers), kParent);
  EXPECT_EQ(TraceStateOf(by_id->headers), kState);
  EXPECT_EQ(by_id->headers.at("tenant"), "t1");
  auto by_key = q().Get(queue, JobRef::ByKey("order-7"));
  ASSERT_TRUE(by_key.ok());
  EXPECT_EQ(TraceParentOf(by_key->headers), kParent);
  auto listed = q().ListJobs(queue, ListRequest{JobState::kScheduled, 10, {}});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->jobs.size(), 1u);
  EXPECT_EQ(TraceStateOf(listed->jobs[0].headers), kState);

  // A replace brings its own context (or none) with its headers.
  EnqueueRequest replace = Traced("traced again", kOtherParent, "");
  replace.key = "order-7";
  replace.replace = true;
  EXPECT_TRUE(MustEnqueue(q(), queue, replace).replaced);
  h_->Restart();
  auto after = q().Get(queue, JobRef::ById(made.id));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(TraceParentOf(after->headers), kOtherParent) << "kept over a restart";
  EXPECT_EQ(TraceStateOf(after->headers), "") << "the replaced job's tracestate went with its headers";

  // Reserve answers carry it, and so do the dead letters.
  auto got = MustReserve(q(), queue, 10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(TraceParentOf(got[0].headers), kOtherParent);
  NackRequest dead{got[0].receipt, std::nullopt, "boom", true};
  ASSERT_TRUE(q().Nack(queue, dead).ok());
  auto dead_jobs = q().ListDead(queue, 10);
  ASSERT_TRUE(dead_jobs.ok());
  ASSERT_EQ(dead_jobs->size(), 1u);
  EXPECT_EQ(TraceParentOf((*dead_jobs)[0].headers), kOtherParent);
}

TEST_P(QueueConformance, AMalformedTraceContextIsRefusedBeforeAnythingIsCreated) {
  const std::string queue = QueueName();
  MustEnqueue(q(), queue, Job("first"));  // the queue exists; the refusals below add nothing to it
  const std::vector<std::pair<Headers, std::string>> bad = {
      {{{"traceparent", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}}, "jobs[1].traceparent"},
      {{{"traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}, "jobs[1].traceparent"},
      {{{"traceparent", std::string(20'000, '0')}}, "jobs[1]."},
      {{{"tracestate", "a=1"}}, "jobs[1].tracestate is given without a traceparent"},
      {{{"traceparent", kParent}, {"tracestate", "a=1,a=2"}}, "jobs[1].tracestate"},
      {{{"traceparent", kParent}, {"tracestate", std::string(600, 'a')}}, "jobs[1].tracestate"},
  };
  for (const auto& [headers, said] : bad) {
    EnqueueRequest broken = Job("broken");
    broken.headers = headers;
    const std::vector<EnqueueRequest> batch = {Traced("fine", kParent, kState), broken};
    auto r = q().EnqueueBatch(queue, batch);
    ASSERT_FALSE(r.ok()) << said;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(said), std::string::npos) << r.status().ToString();
    EXPECT_LT(r.status().message().size(), 500u) << "a huge value is not echoed whole";
  }
  const QueueStats stats = MustStats(q(), queue);
  EXPECT_EQ(stats.ready + stats.scheduled, 1) << "no job of a refused batch was made";
}

}  // namespace delayq::testing
