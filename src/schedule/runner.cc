#include "schedule/runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "core/validate.h"

namespace delayq {
namespace {

// Writers of one schedule (the API's changes, the runner's passes, other servers) compare and
// set its record. A loser reads it again after a growing pause with jitter (1 ms doubling up to
// 50 ms, ~0.5 s in all), so that a change is not refused while the runner's own pass, slow on a
// loaded machine, keeps winning (found under ThreadSanitizer: a PUT after a burst of changes
// answered "kept changing" with no other writer but the runner).
constexpr int kCasTries = 16;

void BackOffAfterConflict(int attempt) {
  if (attempt == 0) return;
  static thread_local std::mt19937 rng(std::random_device{}());
  const int cap_ms = std::min(50, 1 << std::min(attempt - 1, 6));
  std::this_thread::sleep_for(
      std::chrono::microseconds(std::uniform_int_distribution<int>(cap_ms * 500, cap_ms * 1000)(rng)));
}
constexpr int64_t kRetryAfterErrorMs = 1'000;

// A schedule's revision: what its runs are made of (the spec) and when it was last put, paused or
// resumed, as 16 hex digits of FNV-1a over its stored form. The same on every server and build
// (std::hash is not), so servers sharing a store agree on which revision made a job. FNV-1a here,
// not a library's hash: it tells revisions apart, it keeps no secret.
std::string Revision(const StoredSchedule& s) {
  StoredSchedule r{s.queue, s.spec, {}};
  r.state.created_at_ms = s.state.created_at_ms;
  r.state.updated_at_ms = s.state.updated_at_ms;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : EncodeSchedule(r)) h = (h ^ c) * 0x100000001b3ULL;
  return fmt::format("{:016x}", h);
}

// A run's job. Validation passes a revision of the same length as a real one (the headers' size
// counts against the limit).
EnqueueRequest JobFor(const ScheduleSpec& spec, int64_t occurrence_ms,
                      const std::string& revision = std::string(16, '0')) {
  EnqueueRequest r;
  r.payload = spec.payload;
  r.binary = spec.binary;
  r.headers = spec.headers;
  r.headers[kScheduleHeader] = spec.name;
  r.headers[kScheduleRevisionHeader] = revision;
  r.max_attempts = spec.max_attempts;
  r.priority = spec.priority;
  r.group = spec.group;
  r.key = OccurrenceKey(spec.name, occurrence_ms);
  r.when.deliver_at_ms = occurrence_ms;  // a past one is due at once
  return r;
}

// Sorted, without duplicates, only those after `after_ms`.
std::vector<int64_t> Pending(std::vector<int64_t> a, const std::vector<int64_t>& b, int64_t after_ms) {
  a.insert(a.end(), b.begin(), b.end());
  std::erase_if(a, [&](int64_t p) { return p <= after_ms; });
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

int64_t LatestAtMost(const std::vector<int64_t>& a, int64_t limit, int64_t otherwise) {
  int64_t out = otherwise;
  for (int64_t p : a) {
    if (p <= limit) out = std::max(out, p);
  }
  return out;
}

// Whether the queue's config accepts the schedule's runs: each run's job (payload size, headers,
// max_attempts), and room to make it ahead of time (max_delay_ms, ScheduleLimits).
Status RunsFit(const ScheduleSpec& spec, const QueueConfig& config) {
  DELAYQ_RETURN_IF_ERROR(ValidateEnqueue(JobFor(spec, 0), config));
  if (config.max_delay_ms < ScheduleLimits::kMinQueueMaxDelayMs) {
    return Status::InvalidArgument(fmt::format(
        "the queue's max_delay_ms is {} ms; a schedule makes each run into a job ahead of its time, which needs "
        "max_delay_ms of at least {} ms: raise the queue's max_delay_ms, or put the schedule on another queue",
        config.max_delay_ms, ScheduleLimits::kMinQueueMaxDelayMs));
  }
  return Status::Ok();
}

// How far ahead of now a run can be made into a job on a queue with this max_delay_ms.
int64_t Reach(int64_t max_delay_ms) { return std::max<int64_t>(0, max_delay_ms - ScheduleLimits::kReachMarginMs); }

}  // namespace

ScheduleRunner::ScheduleRunner(Queue& queue, ScheduleStore& store, std::shared_ptr<Clock> clock,
                               ScheduleRunnerOptions options)
    : queue_(queue), store_(store), clock_(std::move(clock)), options_(options) {}

ScheduleRunner::~ScheduleRunner() { Stop(); }

void ScheduleRunner::Start() {
  {
    std::lock_guard lock(mu_);
    if (thread_.joinable() || stopping_) return;
  }
  // Outside mu_: the clock calls its listeners under a lock of its own, and this one takes mu_.
  const uint64_t listener = clock_->AddListener([this] {
    std::lock_guard l(mu_);
    poked_ = true;
    cv_.notify_all();
  });
  std::lock_guard lock(mu_);
  clock_listener_ = listener;
  thread_ = std::thread([this] { Loop(); });
}

void ScheduleRunner::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  if (clock_listener_ != 0) clock_->RemoveListener(clock_listener_);  // outside mu_, as in Start
}

void ScheduleRunner::Wake(const Id& id, int64_t at_ms) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = wake_at_.emplace(id, at_ms);
  if (!inserted && at_ms >= it->second) return;
  it->second = at_ms;
  poked_ = true;
  cv_.notify_all();
}

RecurringSchedule ScheduleRunner::View(const StoredSchedule& s, const Occurrences& occurrences, int64_t now_ms) const {
  RecurringSchedule v;
  v.queue = s.queue;
  v.spec = s.spec;
  v.paused = s.state.paused;
  v.created_at_ms = s.state.created_at_ms;
  v.updated_at_ms = s.state.updated_at_ms;
  const int64_t last = LatestAtMost(s.state.pending, now_ms, s.state.last_run_at_ms);
  if (last > 0) v.last_run_at_ms = last;
  if (!s.state.paused) v.next_runs = occurrences.Next(now_ms, ScheduleLimits::kNextRuns);
  return v;
}

Result<std::vector<ScheduleRunner::Made>> ScheduleRunner::MakeRuns(const StoredSchedule& s,
                                                                   const std::vector<int64_t>& coming,
                                                                   const std::vector<int64_t>& again) {
  std::vector<Made> made;
  std::vector<int64_t> runs = coming;
  for (int64_t at : again) {
    if (ClaimedButNeverMade(s, at)) runs.push_back(at);
  }
  if (runs.empty()) return made;
  const std::string revision = Revision(s);
  std::vector<EnqueueRequest> jobs;
  jobs.reserve(runs.size());
  for (int64_t at : runs) jobs.push_back(JobFor(s.spec, at, revision));
  auto results = queue_.EnqueueBatch(s.queue, jobs);
  if (!results.ok()) return results.status();
  for (size_t i = 0; i < results->size(); ++i) {
    const EnqueueResult& r = (*results)[i];
    if (!r.duplicate) {
      made.push_back({r.id, runs[i]});
    } else if (i < coming.size() && TakeOver(s, revision, r.id)) {
      auto again_made = queue_.Enqueue(s.queue, jobs[i]);
      if (again_made.ok() && !again_made->duplicate) made.push_back({again_made->id, runs[i]});
    }
  }
  return made;
}

// Whether run `at`, claimed by an earlier pass, was never made into a job (that pass died, or its
// enqueue failed), so that this pass must make it. Enqueueing every claimed run again and taking
// the duplicates is not safe: a run that came due meanwhile may have been delivered and acked,
// its key freed, and it would be made a second time (seen under load in
// ScheduledRunsAreDeliveredOnceEachAtTheirTime). A made job exists at least until it is due, so a
// look by its key that ended before the run's time and found nothing means it was never made.
// The store may judge "due" by a clock of its own (PostgreSQL's), so the look must end a margin
// before the run's time; a run claimed by a pass that died and not made by the next pass
// before then is lost, as a missed run is (the misfire rule).
bool ScheduleRunner::ClaimedButNeverMade(const StoredSchedule& s, int64_t at) {
  constexpr int64_t kStoreClockSkewMs = 1'000;
  if (at - kStoreClockSkewMs <= clock_->NowMs()) return false;
  auto job = queue_.Get(s.queue, JobRef::ByKey(OccurrenceKey(s.spec.name, at)));
  if (job.ok() || job.status().code() != Code::kNotFound) return false;  // made, or cannot tell: the next pass
  return clock_->NowMs() < at - kStoreClockSkewMs;                       // the look ended before the run could be due
}

// A new run's key named a live job: whether it is an orphan of another revision (a pass that
// raced a change and has not yet taken it back) that this pass, still the schedule's revision,
// cancels to make the run its own. A job of this revision is the run already; one of another
// revision while this pass is stale is left to the current revision.
bool ScheduleRunner::TakeOver(const StoredSchedule& s, const std::string& revision, const std::string& id) {
  auto found = queue_.Get(s.queue, JobRef::ById(id));
  if (!found.ok()) return false;  // gone meanwhile: cancelled, or done
  auto rev = found->headers.find(kScheduleRevisionHeader);
  if (rev != found->headers.end() && rev->second == revision) return false;
  auto current = store_.LoadSchedule(s.queue, s.spec.name);
  if (!current.ok() || !*current || (*current)->state.paused || Revision(**current) != revision) return false;
  return queue_.Cancel(s.queue, JobRef::ById(id)).ok();  // not when due and handed out: it runs
}

void ScheduleRunner::Abandon(const std::string& queue, const std::string& name, const std::vector<Made>& made) {
  const int64_t now = clock_->NowMs();
  for (const Made& m : made) {
    if (m.at <= now) continue;  // due already: a job like any other
    Status s = queue_.Cancel(queue, JobRef::ById(m.id));
    if (!s.ok() && s.code() != Code::kNotFound) {
      spdlog::warn(
          "schedule {} of queue {}: cancelling the job of its occurrence {} made by a pass the schedule's "
          "change overtook: {}",
          name, queue, m.at, s.ToString());
    }
  }
}

Status ScheduleRunner::Enqueue(const StoredSchedule& s, const std::vector<int64_t>& occurrences) {
  if (occurrences.empty()) return Status::Ok();
  std::vector<EnqueueRequest> jobs;
  jobs.reserve(occurrences.size());
  const std::string revision = Revision(s);
  for (int64_t at : occurrences) jobs.push_back(JobFor(s.spec, at, revision));
  auto made = queue_.EnqueueBatch(s.queue, jobs);
  return made.ok() ? Status::Ok() : made.status();
}

// Cancels the jobs of runs a change took off a schedule that are not yet due: each found by its
// key, unless revision `keep` made it (the schedule's current revision, which may share a run's
// key with the one it replaced). The first failure to look or cancel (the store unreachable) is
// answered: the runs stay named for the next writer.
Status ScheduleRunner::CancelRuns(const std::string& queue, const std::string& name, const std::vector<int64_t>& runs,
                                  const std::string& keep, int64_t now) {
  for (int64_t at : runs) {
    if (at <= now) continue;  // due already: a job like any other
    auto job = queue_.Get(queue, JobRef::ByKey(OccurrenceKey(name, at)));
    if (job.status().code() == Code::kNotFound) continue;  // cancelled already, or never made
    if (!job.ok()) return Unfinished(name, queue, at, job.status());
    auto rev = job->headers.find(kScheduleRevisionHeader);
    if (!keep.empty() && rev != job->headers.end() && rev->second == keep) continue;
    Status st = queue_.Cancel(queue, JobRef::ById(job->id));
    // Not found: gone meanwhile. Conflict: due and handed out meanwhile, a job like any other.
    if (!st.ok() && st.code() != Code::kNotFound && st.code() != Code::kConflict)
      return Unfinished(name, queue, at, st);
  }
  return Status::Ok();
}

Status ScheduleRunner::Unfinished(const std::string& name, const std::string& queue, int64_t at, const Status& why) {
  spdlog::warn("schedule {} of queue {}: cancelling the job of its occurrence {}: {} (the next writer tries again)",
               name, queue, at, why.ToString());
  return why;
}

// Finishes what a change left to do: cancels the runs it named in `cancelling`, then takes them off
// by compare-and-set (`s` is then the state as stored). kConflict: it changed meanwhile; another
// error: a cancel failed, and the runs stay named for the next writer.
//
// A named run that came due before it could be cancelled (the store was unreachable meanwhile)
// runs as the job the change meant to cancel: the schedule counts it handled, so that its current
// revision does not make that moment again as a missed run (delayq-check saw a PostgreSQL restart
// during a replace deliver one moment twice: the old revision's job, then the new one's misfire).
Status ScheduleRunner::FinishCancelling(StoredSchedule& s) {
  if (s.state.cancelling.empty()) return Status::Ok();
  const int64_t now = clock_->NowMs();
  DELAYQ_RETURN_IF_ERROR(
      CancelRuns(s.queue, s.spec.name, s.state.cancelling, s.state.paused ? std::string() : Revision(s), now));
  StoredSchedule next = s;
  for (int64_t at : s.state.cancelling) {
    if (at <= now) next.state.handled_until_ms = std::max(next.state.handled_until_ms, at);
  }
  next.state.cancelling.clear();
  DELAYQ_RETURN_IF_ERROR(store_.StoreSchedule(next, s.state.generation));
  s = std::move(next);
  ++s.state.generation;
  return Status::Ok();
}

// The state a change (replace, pause, delete) leaves: the coming runs off `pending`, named in
// `cancelling` until their jobs are cancelled, and a new revision.
void ScheduleRunner::TakeOffComing(StoredSchedule& next, int64_t now) {
  std::vector<int64_t> off = Pending(next.state.cancelling, next.state.pending, now);
  next.state.last_run_at_ms = LatestAtMost(next.state.pending, now, next.state.last_run_at_ms);
  next.state.pending.clear();
  next.state.cancelling = std::move(off);
}

Result<RecurringSchedule> ScheduleRunner::Put(std::string_view queue_view, const ScheduleSpec& spec) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  auto occurrences = Occurrences::Compile(spec);
  if (!occurrences.ok()) return occurrences.status();
  const std::string queue(queue_view);
  // Each occurrence's job must be one the queue accepts (payload size, headers, max_attempts,
  // room to make it ahead): refused here, before anything is stored.
  auto config = queue_.GetConfig(queue);
  if (!config.ok() && config.code() != Code::kNotFound) return config.status();
  DELAYQ_RETURN_IF_ERROR(RunsFit(spec, config.ok() ? *config : QueueConfig{}));
  for (int attempt = 0; attempt < kCasTries; ++attempt) {
    BackOffAfterConflict(attempt);
    auto existing = store_.LoadSchedule(queue, spec.name);
    if (!existing.ok()) return existing.status();
    const int64_t now = clock_->NowMs();
    StoredSchedule s{queue, spec, {}};
    s.state.created_at_ms = *existing ? (*existing)->state.created_at_ms : now;
    // Strictly later than the last change: a new revision even within one millisecond.
    s.state.updated_at_ms = *existing ? std::max(now, (*existing)->state.updated_at_ms + 1) : now;
    s.state.paused = *existing && (*existing)->state.paused;
    if (*existing) {
      s.state.pending = (*existing)->state.pending;
      s.state.cancelling = (*existing)->state.cancelling;
      s.state.last_run_at_ms = (*existing)->state.last_run_at_ms;
      TakeOffComing(s, now);  // its jobs not yet due are cancelled (the pass below does it first)
    }
    // A new or replaced schedule starts now: nothing is missed. Its moment is updated_at's (now, or
    // a millisecond on: a revision newer than the last), which marks it as a start (FreshStart).
    s.state.handled_until_ms = s.state.updated_at_ms;
    Status stored = store_.StoreSchedule(s, *existing ? (*existing)->state.generation : 0);
    if (stored.code() == Code::kConflict) continue;
    DELAYQ_RETURN_IF_ERROR(stored);
    auto pass = Materialize(queue, spec.name);
    if (pass.ok()) MakeClaimed(queue, spec.name);
    if (!pass.ok()) {
      spdlog::warn("schedule {} of queue {}: making its coming runs into jobs: {} (retried)", spec.name, queue,
                   pass.status().ToString());
    }
    Wake({queue, spec.name}, pass.ok() && *pass ? **pass : now + kRetryAfterErrorMs);
    return Get(queue, spec.name);
  }
  return Status::Unavailable(fmt::format(
      "schedule {} of queue {} kept changing under this write (other servers): try again", spec.name, queue));
}

Status ScheduleRunner::CheckConfig(std::string_view queue, const QueueConfig& config) {
  auto all = store_.LoadSchedules(queue);
  if (!all.ok()) return all.status();
  for (const StoredSchedule& s : *all) {
    Status fits = RunsFit(s.spec, config);
    if (!fits.ok()) {
      return Status::Conflict(fmt::format(
          "queue {} has the schedule \"{}\", whose runs this config would refuse ({}); change or delete the "
          "schedule first, or keep a config that takes its runs",
          queue, s.spec.name, fits.message()));
    }
  }
  return Status::Ok();
}

Result<RecurringSchedule> ScheduleRunner::Get(std::string_view queue, std::string_view name) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  auto s = LoadExisting(std::string(queue), name);
  if (!s.ok()) return s.status();
  auto occurrences = Occurrences::Compile(s->spec);
  if (!occurrences.ok()) return occurrences.status();
  return View(*s, *occurrences, clock_->NowMs());
}

Result<std::vector<RecurringSchedule>> ScheduleRunner::List(std::string_view queue) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue));
  auto all = store_.LoadSchedules(queue);
  if (!all.ok()) return all.status();
  std::vector<RecurringSchedule> out;
  const int64_t now = clock_->NowMs();
  for (const auto& s : *all) {
    auto occurrences = Occurrences::Compile(s.spec);
    if (occurrences.ok()) out.push_back(View(s, *occurrences, now));
  }
  return out;
}

Result<StoredSchedule> ScheduleRunner::LoadExisting(const std::string& queue, std::string_view name) {
  auto s = store_.LoadSchedule(queue, name);
  if (!s.ok()) return s.status();
  if (!*s) return Status::NotFound(fmt::format("queue {} has no schedule named \"{}\"", queue, name.substr(0, 200)));
  return std::move(**s);
}

Status ScheduleRunner::Delete(std::string_view queue_view, std::string_view name) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  for (int attempt = 0; attempt < kCasTries; ++attempt) {
    BackOffAfterConflict(attempt);
    auto s = LoadExisting(queue, name);
    if (!s.ok()) return s.status();
    // Its coming runs are cancelled before it goes: first named (paused, so no pass makes more),
    // so that a server that dies before it cancelled them leaves them to the next writer.
    if (!s->state.pending.empty() || !s->state.cancelling.empty()) {
      StoredSchedule next = *s;
      const int64_t now = clock_->NowMs();
      next.state.paused = true;
      next.state.updated_at_ms = std::max(now, s->state.updated_at_ms + 1);
      TakeOffComing(next, now);
      Status stored = store_.StoreSchedule(next, s->state.generation);
      if (stored.code() == Code::kConflict) continue;
      DELAYQ_RETURN_IF_ERROR(stored);
      next.state.generation = s->state.generation + 1;
      Status finished = FinishCancelling(next);
      if (finished.code() == Code::kConflict) continue;
      DELAYQ_RETURN_IF_ERROR(finished);
      *s = std::move(next);
    }
    Status erased = store_.EraseSchedule(queue, name, s->state.generation);
    if (erased.code() == Code::kConflict) continue;
    DELAYQ_RETURN_IF_ERROR(erased);
    std::lock_guard lock(mu_);
    wake_at_.erase({queue, std::string(name)});
    return Status::Ok();
  }
  return Status::Unavailable("the schedule kept changing under this delete (other servers): try again");
}

Result<RecurringSchedule> ScheduleRunner::SetPaused(std::string_view queue_view, std::string_view name, bool paused) {
  DELAYQ_RETURN_IF_ERROR(ValidateQueueName(queue_view));
  const std::string queue(queue_view);
  for (int attempt = 0; attempt < kCasTries; ++attempt) {
    BackOffAfterConflict(attempt);
    auto s = LoadExisting(queue, name);
    if (!s.ok()) return s.status();
    if (s->state.paused == paused) return Get(queue, name);
    const int64_t now = clock_->NowMs();
    StoredSchedule next = *s;
    next.state.paused = paused;
    next.state.updated_at_ms = std::max(now, s->state.updated_at_ms + 1);
    // Paused: its coming jobs are cancelled. Resumed: it starts again from now (a pause is not a
    // misfire: what it held back does not run).
    TakeOffComing(next, now);
    next.state.handled_until_ms = next.state.updated_at_ms;  // a start (FreshStart), as a put's
    Status stored = store_.StoreSchedule(next, s->state.generation);
    if (stored.code() == Code::kConflict) continue;
    DELAYQ_RETURN_IF_ERROR(stored);
    next.state.generation = s->state.generation + 1;
    if (paused) {
      (void)FinishCancelling(next);  // a conflict: the next writer finishes it
    } else {
      auto pass = Materialize(queue, name);
      if (pass.ok()) MakeClaimed(queue, name);
      Wake({queue, std::string(name)}, pass.ok() && *pass ? **pass : now + kRetryAfterErrorMs);
    }
    return Get(queue, name);
  }
  return Status::Unavailable("the schedule kept changing under this change (other servers): try again");
}

// A put or resume stores its moment as the schedule's start (handled_until, and updated_at the
// same). The first pass after it may begin later (the pass waits for others, the store is slow):
// the runs that came due meanwhile are the ones a pass at the start would have made ahead, so they
// are made now, late, not judged missed (CI saw a run come due between a put and its pass made as
// a missed run; with misfire skip it was lost). Beyond the lead, a server was not running it.
std::optional<int64_t> ScheduleRunner::FreshStart(const StoredSchedule& s, int64_t now) const {
  const int64_t start = s.state.handled_until_ms;
  if (start != s.state.updated_at_ms || start >= now || now - start > options_.lead_ms) return std::nullopt;
  return start;
}

// Missed: occurrences that passed with no job made for them. Claimed (the state moved past them
// by compare-and-set) before their jobs are made, so only one server makes them. (A moment that
// passed with no occurrence in it misses nothing: the coming ones start from now.) On success `s`
// is the state as stored; kConflict: another writer moved it, read it again.
Status ScheduleRunner::ClaimMissed(StoredSchedule& s, const Occurrences& occurrences, int64_t now) {
  if (s.state.handled_until_ms >= now || occurrences.Between(s.state.handled_until_ms, now, 1, false).empty()) {
    return Status::Ok();
  }
  std::vector<int64_t> missed;
  if (s.spec.misfire == Misfire::kRunOnce) {
    missed = occurrences.Between(s.state.handled_until_ms, now, 1, true);
  } else if (s.spec.misfire == Misfire::kRunAll) {
    missed = occurrences.Between(s.state.handled_until_ms, now, ScheduleLimits::kMaxMisfireRuns, true);
  }
  StoredSchedule claimed = s;
  claimed.state.handled_until_ms = now;
  claimed.state.last_run_at_ms =
      std::max(LatestAtMost(s.state.pending, now, s.state.last_run_at_ms), missed.empty() ? 0 : missed.back());
  claimed.state.pending = Pending(s.state.pending, {}, now);
  DELAYQ_RETURN_IF_ERROR(store_.StoreSchedule(claimed, s.state.generation));
  if (!missed.empty()) {
    spdlog::info("schedule {} of queue {}: {} of the runs missed while no server ran it run now ({})", s.spec.name,
                 s.queue, missed.size(), MisfireName(s.spec.misfire));
    Status made = Enqueue(s, missed);
    if (!made.ok()) {
      spdlog::error("schedule {} of queue {}: the {} missed runs could not be made into jobs and are lost: {}",
                    s.spec.name, s.queue, missed.size(), made.ToString());
    }
  }
  s = std::move(claimed);  // as stored: go on to the coming ones from it
  ++s.state.generation;
  return Status::Ok();
}

// Coming: every occurrence up to now + lead, and one beyond, so the next one is always a job
// before the last one comes due. Nothing is made further ahead than the queue takes a delay
// (max_delay_ms, less a margin): a run beyond that is made once it comes within reach. Runs
// claimed before that are still to come within the lead are made again: a pass that claimed them
// may have died (or failed) before making them; where they exist, that is a duplicate.
ScheduleRunner::ComingPlan ScheduleRunner::PlanComing(const StoredSchedule& s, const Occurrences& occurrences,
                                                      int64_t now, int64_t from_at_least) {
  ComingPlan plan;
  auto config = queue_.GetConfig(s.queue);
  const int64_t reach = Reach(config.ok() ? config->max_delay_ms : QueueConfig{}.max_delay_ms);
  plan.lead = std::min(options_.lead_ms, reach);
  for (int64_t p : s.state.pending) {
    if (p > now && p <= now + plan.lead) plan.again.push_back(p);
  }
  const int64_t from = std::max(s.state.handled_until_ms, from_at_least);
  if (from > now + plan.lead) {
    plan.wake = from - plan.lead / 2;  // up to date
    return plan;
  }
  plan.coming = occurrences.Between(from, now + plan.lead, static_cast<size_t>(options_.max_per_pass), false);
  plan.capped = plan.coming.size() >= static_cast<size_t>(options_.max_per_pass);
  if (plan.capped) return plan;
  auto beyond = occurrences.NextAfter(std::max(from, now + plan.lead));
  if (beyond && *beyond - now <= reach) {
    plan.coming.push_back(*beyond);
  } else if (beyond && plan.coming.empty()) {
    plan.wake = *beyond - reach;  // when it comes within reach
  } else if (!beyond && plan.coming.empty()) {
    plan.ended = plan.again.empty();
  }
  return plan;
}

// A pass claims its runs (records them in the state by compare-and-set), then makes them, then
// checks the schedule is still the revision it made them for: a put, pause or delete that came
// between cancelled the claimed runs before they existed, so the pass takes back what it made.
// A pass that dies between claiming and making leaves runs the next pass makes (PlanComing).
Result<std::optional<int64_t>> ScheduleRunner::Materialize(std::string_view queue, std::string_view name) {
  std::lock_guard pass(passes_mu_);
  for (int attempt = 0; attempt < kCasTries; ++attempt) {
    BackOffAfterConflict(attempt);
    auto loaded = store_.LoadSchedule(queue, name);
    if (!loaded.ok()) return loaded.status();
    if (!*loaded) return std::optional<int64_t>{};
    StoredSchedule s = std::move(**loaded);
    Status finished = FinishCancelling(s);  // what a change (or a server that died in one) left
    if (finished.code() == Code::kConflict) continue;
    DELAYQ_RETURN_IF_ERROR(finished);
    if (s.state.paused) return std::optional<int64_t>{};
    auto occurrences = Occurrences::Compile(s.spec);
    if (!occurrences.ok()) return occurrences.status();
    const int64_t now = clock_->NowMs();
    const std::optional<int64_t> start = FreshStart(s, now);
    Status missed = start ? Status::Ok() : ClaimMissed(s, *occurrences, now);
    if (missed.code() == Code::kConflict) continue;
    DELAYQ_RETURN_IF_ERROR(missed);
    const ComingPlan plan = PlanComing(s, *occurrences, now, start.value_or(now));
    if (plan.ended) return std::optional<int64_t>{};
    if (plan.coming.empty() && plan.again.empty()) return std::optional<int64_t>(plan.wake.value_or(now + 1'000));
    StoredSchedule next = s;
    if (!plan.coming.empty()) next.state.handled_until_ms = std::max(next.state.handled_until_ms, plan.coming.back());
    next.state.last_run_at_ms = LatestAtMost(s.state.pending, now, s.state.last_run_at_ms);
    next.state.pending = Pending(s.state.pending, plan.coming, now);
    Status claimed = store_.StoreSchedule(next, s.state.generation);
    if (claimed.code() == Code::kConflict) continue;  // another writer moved it: read it again
    DELAYQ_RETURN_IF_ERROR(claimed);
    auto made = MakeRuns(s, plan.coming, plan.again);  // failed: claimed, so the next pass makes them
    if (!made.ok()) return made.status();
    AbandonIfChanged(s, *made);
    if (plan.capped) return std::optional<int64_t>(now);  // more to make at once
    if (plan.coming.empty()) return std::optional<int64_t>(plan.wake.value_or(now + 1'000));
    return std::optional<int64_t>(std::max(next.state.handled_until_ms - plan.lead / 2, now + 100));
  }
  return Status::Unavailable("the schedule kept changing under this pass (other servers)");
}

// A put or resume answers once its coming runs are jobs: a pass running beside it (the runner's
// thread, another server) may have claimed them and not yet made them, so they are made here too
// (a duplicate where they exist).
void ScheduleRunner::MakeClaimed(std::string_view queue, std::string_view name) {
  std::lock_guard pass(passes_mu_);
  auto loaded = store_.LoadSchedule(queue, name);
  if (!loaded.ok() || !*loaded || (*loaded)->state.paused) return;
  const StoredSchedule& s = **loaded;
  const int64_t now = clock_->NowMs();
  std::vector<int64_t> claimed;
  for (int64_t p : s.state.pending) {
    if (p > now) claimed.push_back(p);
  }
  auto made = MakeRuns(s, {}, claimed);
  if (made.ok()) AbandonIfChanged(s, *made);
}

void ScheduleRunner::AbandonIfChanged(const StoredSchedule& made_for, const std::vector<Made>& made) {
  if (made.empty()) return;
  auto now = store_.LoadSchedule(made_for.queue, made_for.spec.name);
  if (!now.ok()) return;  // cannot tell: the runs stay (a change after this cancels them by key)
  if (!*now || (*now)->state.paused || Revision(**now) != Revision(made_for)) {
    Abandon(made_for.queue, made_for.spec.name, made);
  }
}

void ScheduleRunner::Loop() {
  int64_t next_refresh = 0;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const int64_t now = clock_->NowMs();
    if (now >= next_refresh) {
      // Schedules made or changed by other servers (and this one's, after a restart).
      lock.unlock();
      auto all = store_.LoadSchedules("");
      lock.lock();
      if (all.ok()) {
        // New ones, and those another server changed (a new spec there may need runs sooner than
        // this server planned), are looked at now.
        std::map<Id, uint64_t> generations;
        for (const auto& s : *all) {
          Id id{s.queue, s.spec.name};
          auto known = generations_.find(id);
          if (!wake_at_.contains(id) || known == generations_.end() || known->second != s.state.generation) {
            wake_at_[id] = now;
          }
          generations.emplace(std::move(id), s.state.generation);
        }
        std::erase_if(wake_at_, [&](const auto& entry) { return !generations.contains(entry.first); });
        generations_ = std::move(generations);
      } else {
        spdlog::warn("reading the schedules: {}", all.status().ToString());
      }
      next_refresh = now + options_.refresh_ms;
    }
    std::vector<Id> due;
    for (const auto& [id, at] : wake_at_) {
      if (at <= now) due.push_back(id);
    }
    for (const Id& id : due) {
      wake_at_.erase(id);
      lock.unlock();
      auto pass = Materialize(id.first, id.second);
      lock.lock();
      if (!pass.ok()) {
        spdlog::warn("schedule {} of queue {}: {} (retried in a second)", id.second, id.first,
                     pass.status().ToString());
        wake_at_[id] = now + kRetryAfterErrorMs;
      } else if (*pass) {
        auto [it, inserted] = wake_at_.emplace(id, **pass);
        if (!inserted) it->second = std::min(it->second, **pass);
      }
      if (stopping_) return;
    }
    if (poked_) {
      poked_ = false;
      continue;
    }
    int64_t wake = next_refresh;
    for (const auto& [id, at] : wake_at_) wake = std::min(wake, at);
    const auto wait = clock_->RealTimeUntil(wake * 1000);
    if (wait.count() > 0) cv_.wait_for(lock, wait, [this] { return stopping_ || poked_; });
  }
}

}  // namespace delayq
