#include "core/errors.h"

#include <fmt/format.h>

namespace delayq::errors {
namespace {

// Names and keys are echoed back bounded: an error message never carries a request's bulk.
std::string_view Short(std::string_view s, size_t max) { return s.substr(0, max); }

}  // namespace

std::string DeadJobWarning(std::string_view queue, std::string_view id, int32_t attempt, std::string_view last_error) {
  const std::string after = attempt > 0 ? fmt::format(" after {} attempt{}", attempt, attempt == 1 ? "" : "s") : "";
  return fmt::format("job {} of queue \"{}\" went dead{}{}{}; replay it with POST /v1/queues/{}/dead/replay", id,
                     Short(queue, 200), after, last_error.empty() ? "" : ": ", Short(last_error, 200),
                     Short(queue, 200));
}

Status StoreClosed() { return Status::Unavailable("the store is closed (delayq is shutting down)"); }

Status UnknownQueue(std::string_view queue) {
  return Status::NotFound(
      fmt::format("queue \"{}\" does not exist: it was deleted, or no job was ever enqueued to it and it has no config",
                  Short(queue, 200)));
}

Status QueueLimit(std::string_view queue, size_t would_be, size_t limit) {
  return Status::ResourceExhausted(
      fmt::format("queue \"{}\" would be queue {}, over the limit of {} (--max-queues); delete queues that are no "
                  "longer used (DELETE /v1/queues/NAME) or raise the limit",
                  Short(queue, 200), would_be, limit));
}

Status QueueNotEmpty(std::string_view queue, int64_t jobs) {
  return Status::Conflict(
      fmt::format("queue \"{}\" holds {} jobs (scheduled, ready, reserved or dead); delete it with force=true to "
                  "delete them too",
                  Short(queue, 200), jobs));
}

Status NotAJobId(std::string_view field, std::string_view text) {
  return Status::InvalidArgument(
      fmt::format("{} \"{}\" is not a job id; job ids are 26 characters of Crockford base32", field, Short(text, 64)));
}

Status NoSuchJob(std::string_view queue, std::string_view id) {
  return Status::NotFound(fmt::format("job {} does not exist in queue {} (never, or it was acked, cancelled or purged)",
                                      Short(id, 64), Short(queue, 200)));
}

Status NoJobWithKey(std::string_view queue, std::string_view key) {
  return Status::NotFound(fmt::format("no live job in queue {} has key \"{}\"", Short(queue, 200), Short(key, 128)));
}

Status ReservedCannotCancel(std::string_view id) {
  return Status::Conflict(
      fmt::format("job {} is reserved by a consumer; it can be cancelled once it is nacked or its lease expires", id));
}

Status ReservedCannotReschedule(std::string_view id) {
  return Status::Conflict(
      fmt::format("job {} is reserved by a consumer; only scheduled and ready jobs can be rescheduled", id));
}

Status DeadCannotReschedule(std::string_view id) {
  return Status::Conflict(fmt::format("job {} is dead; replay it (dead/replay) to make it ready again", id));
}

Status CompletedCannotReschedule(std::string_view id) {
  return Status::Conflict(fmt::format("job {} is completed (acked); enqueue a new job to run it again", id));
}

Status ReservedCannotReplace(std::string_view field_prefix, std::string_view key, std::string_view id) {
  return Status::Conflict(
      fmt::format("{}key \"{}\" names job {}, which a consumer has reserved; it can be replaced after it is acked or "
                  "nacked or its lease expires",
                  field_prefix, Short(key, 128), id));
}

Status DeliveryJobGone(std::string_view id) {
  return Status::NotFound(fmt::format("job {} no longer exists (it was acked, cancelled or purged)", id));
}

Status DeliveryWentDead(std::string_view id, int32_t attempt, int32_t max_attempts) {
  return Status::LeaseExpired(fmt::format(
      "job {} went dead after attempt {} of {}; the delivery this receipt names is over", id, attempt, max_attempts));
}

Status DeliveredAgain(std::string_view id, int32_t attempt) {
  return Status::LeaseExpired(
      fmt::format("the receipt names an earlier delivery of job {}; after its lease expired the job was delivered "
                  "again (attempt {}), and only the newest receipt counts",
                  id, attempt));
}

Status ReleasedTooLate(std::string_view id) {
  return Status::LeaseExpired(fmt::format(
      "the lease of job {}'s delivery ran out before it was given back: that delivery counted as an attempt", id));
}

Status DeliveryOver(std::string_view id) {
  return Status::LeaseExpired(
      fmt::format("the receipt names an earlier delivery of job {}; the job has since been nacked, released (as "
                  "a push stream's unacknowledged jobs are when it closes), rescheduled, replaced or delivered again",
                  id));
}

}  // namespace delayq::errors
