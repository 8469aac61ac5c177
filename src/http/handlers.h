// The handlers of the route table (routes.cc), by family. Each answers one matched request from
// the Queue; none knows which store is behind it.
#pragma once

#include "http/routes.h"

namespace delayq::http::handlers {

// The service: the dashboard page, health, metrics, history (handlers_service.cc).
HttpResponse Dashboard(Context& c, const Call& call);
HttpResponse Healthz(Context& c, const Call& call);
HttpResponse VersionJson(Context& c, const Call& call);
HttpResponse Readyz(Context& c, const Call& call);
HttpResponse MetricsText(Context& c, const Call& call);
HttpResponse HistoryJson(Context& c, const Call& call);

// Queues (handlers_queues.cc).
HttpResponse ListQueues(Context& c, const Call& call);
HttpResponse Stats(Context& c, const Call& call);
HttpResponse DeleteQueue(Context& c, const Call& call);
HttpResponse GetConfig(Context& c, const Call& call);
HttpResponse PutConfig(Context& c, const Call& call);
HttpResponse Pause(Context& c, const Call& call);
HttpResponse Resume(Context& c, const Call& call);
HttpResponse Schedule(Context& c, const Call& call);
HttpResponse DeadList(Context& c, const Call& call);
HttpResponse OpenApiJson(Context& c, const Call& call);
HttpResponse ListJobs(Context& c, const Call& call);  // GET /jobs?state=S (GetJob hands it over)
HttpResponse DeadPurge(Context& c, const Call& call);
HttpResponse DeadReplay(Context& c, const Call& call);

// Recurring schedules (handlers_schedules.cc).
HttpResponse ListSchedules(Context& c, const Call& call);
HttpResponse GetSchedule(Context& c, const Call& call);
HttpResponse PutSchedule(Context& c, const Call& call);
HttpResponse DeleteSchedule(Context& c, const Call& call);
HttpResponse PauseSchedule(Context& c, const Call& call);
HttpResponse ResumeSchedule(Context& c, const Call& call);

// Jobs (handlers_jobs.cc): by id (/jobs/{id}) or by key (/jobs?key=K).
std::function<void()> Enqueue(Context& c, const Call& call, Reply reply);  // answered once durable
// A job; with ?wait_ms=N, once it is completed, dead or cancelled, or when wait_ms ends.
std::function<void()> GetJob(Context& c, const Call& call, Reply reply);
std::function<void()> Reschedule(Context& c, const Call& call, Reply reply);  // answered once durable
std::function<void()> Cancel(Context& c, const Call& call, Reply reply);      // answered once durable

// Deliveries (handlers_deliveries.cc).
std::function<void()> Reserve(Context& c, const Call& call, Reply reply);
HttpResponse Stream(Context& c, const Call& call);  // push delivery: a streamed answer (push_stream.h)
std::function<void()> Ack(Context& c, const Call& call, Reply reply);    // answered once durable
std::function<void()> Nack(Context& c, const Call& call, Reply reply);   // answered once durable
std::function<void()> Touch(Context& c, const Call& call, Reply reply);  // answered once durable
HttpResponse Release(Context& c, const Call& call);

}  // namespace delayq::http::handlers
