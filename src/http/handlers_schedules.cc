// Recurring schedules (docs/http-api.md, Recurring schedules): /v1/queues/{q}/schedules[/{name}[/pause|/resume]]. The
// store keeps and runs them (Queue::PutSchedule and the others); these only speak the wire format.
#include "http/handlers.h"
#include "http/response.h"
#include "wire/schedule.h"

namespace delayq::http::handlers {
namespace {

const std::string& NameOf(const Call& call) { return call.params.at(1); }

HttpResponse Answer(const Result<RecurringSchedule>& s) {
  if (!s.ok()) return ErrorResponse(s.status());
  return JsonResponse(200, wire::WriteSchedule(*s));
}

}  // namespace

HttpResponse ListSchedules(Context& c, const Call& call) {
  auto list = c.queue.ListSchedules(call.queue());
  if (!list.ok()) return ErrorResponse(list.status());
  return JsonResponse(200, wire::WriteSchedules(*list));
}

HttpResponse GetSchedule(Context& c, const Call& call) {
  return Answer(c.queue.GetSchedule(call.queue(), NameOf(call)));
}

HttpResponse PutSchedule(Context& c, const Call& call) {
  auto spec = wire::ParseScheduleSpec(call.request.body, NameOf(call));
  if (!spec.ok()) return ErrorResponse(spec.status());
  return Answer(c.queue.PutSchedule(call.queue(), *spec));
}

HttpResponse DeleteSchedule(Context& c, const Call& call) {
  Status st = c.queue.DeleteSchedule(call.queue(), NameOf(call));
  if (!st.ok()) return ErrorResponse(st);
  return JsonResponse(200, R"({"deleted":true})");
}

HttpResponse PauseSchedule(Context& c, const Call& call) {
  return Answer(c.queue.PauseSchedule(call.queue(), NameOf(call), true));
}

HttpResponse ResumeSchedule(Context& c, const Call& call) {
  return Answer(c.queue.PauseSchedule(call.queue(), NameOf(call), false));
}

}  // namespace delayq::http::handlers
