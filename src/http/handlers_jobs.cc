// Job routes: enqueue, listing by state (/jobs?state=S), and a job by id (/jobs/{id}) or by key
// (/jobs?key=K): get (or wait for its outcome: ?wait_ms=N), reschedule, cancel.
#include <fmt/format.h>

#include "core/trace_context.h"
#include "http/handlers.h"
#include "http/response.h"
#include "wire/enqueue.h"
#include "wire/job.h"
#include "wire/when.h"

namespace delayq::http::handlers {
namespace {

// The job a call names: its {id}, or the key of ?key=K.
Result<JobRef> RefOf(const Call& call) {
  if (call.params.size() > 1) return JobRef::ById(call.params[1]);
  if (const std::string* key = call.target.Query("key")) return JobRef::ByKey(*key);
  return Status::InvalidArgument("give a job id (/v1/queues/{q}/jobs/{id}) or a key (/v1/queues/{q}/jobs?key=K)");
}

// Adds a header to a job if the job's headers stay within their limits with it.
bool PutIfRoom(Headers& headers, std::string_view name, const std::string& value) {
  size_t bytes = 0;
  for (const auto& [n, v] : headers) bytes += n.size() + v.size();
  if (headers.size() + 1 > Limits::kMaxHeaders || bytes + name.size() + value.size() > Limits::kMaxHeaderBytes) {
    return false;
  }
  return headers.try_emplace(std::string(name), value).second;
}

// The request's traceparent header (and its tracestate) on each job that carries no context of its
// own. A header W3C would not read is passed over, as W3C asks of a receiver, and so is one a job
// has no room for in its headers (Limits::kMaxHeaders, kMaxHeaderBytes): a proxy's or an agent's
// headers never make an enqueue fail.
void ApplyTraceContext(const HttpRequest& request, std::vector<EnqueueRequest>& jobs) {
  if (request.traceparent.empty() || !ValidateTraceParent(request.traceparent, "traceparent").ok()) return;
  const bool state = !request.tracestate.empty() && ValidateTraceState(request.tracestate, "tracestate").ok();
  for (EnqueueRequest& job : jobs) {
    const bool own = job.headers.contains(std::string(kTraceParent)) || job.headers.contains(std::string(kTraceState));
    if (own || !PutIfRoom(job.headers, kTraceParent, request.traceparent)) continue;
    if (state) PutIfRoom(job.headers, kTraceState, request.tracestate);
  }
}

}  // namespace

// No thread waits for the fsync: the store answers when the jobs are durable.
std::function<void()> Enqueue(Context& c, const Call& call, Reply reply) {
  auto body = wire::ParseEnqueueRequest(call.request.body);
  if (!body.ok()) {
    reply(ErrorResponse(body.status()));
    return {};
  }
  ApplyTraceContext(call.request, body->jobs);
  if (!body->batch) {
    c.queue.EnqueueAsync(call.queue(), body->jobs[0], [reply = std::move(reply)](Result<EnqueueResult> r) {
      if (!r.ok()) return reply(ErrorResponse(r.status()));
      reply(JsonResponse(r->duplicate ? 200 : 201, wire::WriteEnqueueResponse(*r)));
    });
    return {};
  }
  c.queue.EnqueueBatchAsync(call.queue(), body->jobs, [reply = std::move(reply)](Result<std::vector<EnqueueResult>> r) {
    if (!r.ok()) return reply(ErrorResponse(r.status()));
    reply(JsonResponse(201, wire::WriteEnqueueBatchResponse(*r)));
  });
  return {};
}

namespace {

// wait_ms of a GET of one job: 0..Limits::kMaxWaitMs, or nothing.
Result<std::optional<int64_t>> WaitMsOf(const Call& call) {
  const std::string* w = call.target.Query("wait_ms");
  if (!w) return std::optional<int64_t>();
  const size_t digits = w->find_first_not_of('0');  // leading zeros are no digits of the number
  const std::string number = digits == std::string::npos ? "0" : w->substr(digits);
  if (w->empty() || w->find_first_not_of("0123456789") != std::string::npos || number.size() > 5 ||
      std::stoll(number) > Limits::kMaxWaitMs) {
    return Status::InvalidArgument(fmt::format("wait_ms \"{}{}\" must be a number of milliseconds from 0 to {}",
                                               w->substr(0, 20), w->size() > 20 ? "..." : "", Limits::kMaxWaitMs));
  }
  return std::optional<int64_t>(std::stoll(number));
}

HttpResponse JobAnswer(const Result<Job>& job) {
  return job.ok() ? JsonResponse(200, wire::WriteJobResponse(*job)) : ErrorResponse(job.status());
}

// A GET with wait_ms: answered by the store's wait (Queue::WaitOutcomeAsync), holding no thread;
// it counts against --max-waiting as a waiting reserve does, and a hang-up ends it. A server
// with no room left still answers what needs no wait (a final job, none) as a GET does.
std::function<void()> WaitForOutcome(Context& c, const Call& call, const JobRef& ref, int64_t wait_ms, Reply reply) {
  if (c.metrics.waiting.load() + c.metrics.streams.load() >= c.options.max_waiting) {
    auto job = c.queue.Get(call.queue(), ref);
    if (!job.ok() || IsFinal(job->state)) {
      reply(JobAnswer(job));
      return {};
    }
    reply(ErrorResponse(Status::ResourceExhausted(
        fmt::format("{} reserves, streams and waits for an outcome are already waiting, the most this server holds "
                    "(--max-waiting); retry shortly or use a shorter wait_ms",
                    c.options.max_waiting))));
    return {};
  }
  ++c.metrics.waiting;
  Queue& queue = c.queue;
  Metrics& metrics = c.metrics;
  const uint64_t handle =
      queue.WaitOutcomeAsync(call.queue(), ref, wait_ms, [&metrics, reply = std::move(reply)](Result<Job> job) {
        --metrics.waiting;
        reply(JobAnswer(job));
      });
  if (handle == 0) return {};
  return [&queue, handle] { queue.CancelOutcomeWait(handle); };
}

}  // namespace

std::function<void()> GetJob(Context& c, const Call& call, Reply reply) {
  if (call.params.size() == 1 && call.target.Query("state")) {
    if (call.target.Query("key")) {
      reply(ErrorResponse(Status::InvalidArgument("give either key=K (one job) or state=S (a listing), not both")));
    } else if (call.target.Query("wait_ms")) {
      reply(ErrorResponse(Status::InvalidArgument(
          "wait_ms waits for one job's outcome (/jobs/{id}?wait_ms=N or /jobs?key=K&wait_ms=N), not a listing")));
    } else {
      reply(ListJobs(c, call));
    }
    return {};
  }
  if (call.params.size() == 1 && !call.target.Query("key")) {
    reply(ErrorResponse(Status::InvalidArgument(
        "give state=scheduled|ready|reserved|dead|completed to list jobs, or key=K for one job")));
    return {};
  }
  auto ref = RefOf(call);
  auto wait_ms = WaitMsOf(call);
  if (!ref.ok() || !wait_ms.ok()) {
    reply(ErrorResponse(!ref.ok() ? ref.status() : wait_ms.status()));
    return {};
  }
  if (!*wait_ms || **wait_ms == 0) {  // none, or 0: a plain read
    reply(JobAnswer(c.queue.Get(call.queue(), *ref)));
    return {};
  }
  return WaitForOutcome(c, call, *ref, **wait_ms, std::move(reply));
}

std::function<void()> Reschedule(Context& c, const Call& call, Reply reply) {
  auto ref = RefOf(call);
  if (!ref.ok()) {
    reply(ErrorResponse(ref.status()));
    return {};
  }
  auto when = wire::ParseRescheduleRequest(call.request.body);
  if (!when.ok()) {
    reply(ErrorResponse(when.status()));
    return {};
  }
  c.queue.RescheduleAsync(call.queue(), *ref, *when, [reply = std::move(reply)](Result<Job> job) {
    if (!job.ok()) return reply(ErrorResponse(job.status()));
    reply(JsonResponse(200, wire::WriteJobResponse(*job)));
  });
  return {};
}

std::function<void()> Cancel(Context& c, const Call& call, Reply reply) {
  auto ref = RefOf(call);
  if (!ref.ok()) {
    reply(ErrorResponse(ref.status()));
    return {};
  }
  c.queue.CancelAsync(call.queue(), *ref, [reply = std::move(reply)](Status st) {
    if (!st.ok()) return reply(ErrorResponse(st));
    reply(JsonResponse(200, R"({"cancelled":true})"));
  });
  return {};
}

}  // namespace delayq::http::handlers
