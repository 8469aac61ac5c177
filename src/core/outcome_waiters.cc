#include "core/outcome_waiters.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/mutant.h"
#include "core/validate.h"

namespace delayq {
namespace {

Status Closed() {
  return Status::Unavailable("the store is closing (the server restarts or stops): wait for the job again");
}

}  // namespace

OutcomeWaiters::OutcomeWaiters(Hooks hooks) : hooks_(std::move(hooks)) {}

OutcomeWaiters::~OutcomeWaiters() { Close(); }

std::string OutcomeWaiters::JobKey(std::string_view queue, std::string_view id) {
  std::string key(queue);
  key.push_back('\0');
  key.append(id);
  return key;
}

uint64_t OutcomeWaiters::Wait(std::string_view queue, const JobRef& ref, int64_t wait_ms, JobCallback done) {
  if (Status valid = ValidateWaitMs(wait_ms); !valid.ok()) {
    done(std::move(valid));
    return 0;
  }
  auto job = hooks_.get(queue, ref);
  if (!job.ok() || IsFinal(job->state) || wait_ms == 0 || MutantStrikes("outcome-early", 5)) {  // core/mutant.h
    done(std::move(job));
    return 0;
  }
  std::unique_lock lock(mu_);
  if (Status refused = AdmitLocked(); !refused.ok()) {
    lock.unlock();  // `done` may call in again
    done(std::move(refused));
    return 0;
  }
  const uint64_t handle = AddLocked(queue, *job, wait_ms, std::move(done));
  lock.unlock();
  // Registered first, read again second: a transition after this read notifies the waiter; one
  // before it is what the read sees.
  const std::string id = job->id;
  Status watched = hooks_.watch ? hooks_.watch(queue, id, wait_ms) : Status::Ok();
  if (watched.ok()) {
    lock.lock();
    if (auto it = waiters_.find(handle); it != waiters_.end()) it->second.watched = true;
    lock.unlock();
  }
  auto again = watched.ok() ? hooks_.get(queue, JobRef{id, {}}) : Result<Job>(watched);
  if (again.ok() && !IsFinal(again->state)) return handle;
  lock.lock();
  std::optional<Waiter> w = TakeLocked(handle);
  lock.unlock();
  if (!w) return 0;  // answered meanwhile
  if (!again.ok() && again.status().code() == Code::kNotFound) {
    again = Status::NotFound(
        fmt::format("job {} in queue \"{}\" ended before the wait began (acked with keep_completed_ms 0, or cancelled)",
                    id, queue));
  }
  w->done(std::move(again));
  return 0;
}

Status OutcomeWaiters::AdmitLocked() const {
  if (closed_) return Closed();
  if (count_.load() < Limits::kMaxOutcomeWaiters) return Status::Ok();
  return Status::ResourceExhausted(
      fmt::format("{} waits for an outcome are already open, the most one store holds; retry shortly or wait on "
                  "fewer jobs at once",
                  Limits::kMaxOutcomeWaiters));
}

uint64_t OutcomeWaiters::AddLocked(std::string_view queue, const Job& job, int64_t wait_ms, JobCallback done) {
  const uint64_t handle = next_handle_++;
  Waiter w{JobKey(queue, job.id), std::string(queue), job, Steady::now() + std::chrono::milliseconds(wait_ms),
           std::move(done)};
  by_job_[w.job].push_back(handle);
  deadlines_.emplace(w.deadline, handle);
  waiters_.emplace(handle, std::move(w));
  ++count_;
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  cv_.notify_one();
  return handle;
}

std::optional<OutcomeWaiters::Waiter> OutcomeWaiters::TakeLocked(uint64_t handle) {
  auto it = waiters_.find(handle);
  if (it == waiters_.end()) return std::nullopt;
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  --count_;
  auto [lo, hi] = deadlines_.equal_range(w.deadline);
  for (auto d = lo; d != hi; ++d) {
    if (d->second == handle) {
      deadlines_.erase(d);
      break;
    }
  }
  auto j = by_job_.find(w.job);
  if (j != by_job_.end()) {
    std::erase(j->second, handle);
    if (j->second.empty()) by_job_.erase(j);
  }
  return w;
}

void OutcomeWaiters::Cancel(uint64_t handle) {
  std::optional<Waiter> w;
  {
    std::lock_guard lock(mu_);
    w = TakeLocked(handle);
  }
  if (w) w->done(Status::Unavailable("the wait for an outcome was ended early (its caller went away)"));
}

void OutcomeWaiters::Notify(std::string_view queue, std::string_view id, JobState state) {
  if (count_.load() == 0) return;
  std::lock_guard lock(mu_);
  std::string job = JobKey(queue, id);
  if (!by_job_.contains(job)) return;
  notices_[std::move(job)] = state;
  cv_.notify_one();
}

void OutcomeWaiters::NotifyQueue(std::string_view queue, JobState state) {
  if (count_.load() == 0) return;
  std::lock_guard lock(mu_);
  const std::string prefix = JobKey(queue, "");
  for (const auto& [job, handles] : by_job_) {
    if (job.starts_with(prefix)) notices_[job] = state;
  }
  cv_.notify_one();
}

void OutcomeWaiters::Recheck() {
  if (count_.load() == 0) return;
  std::lock_guard lock(mu_);
  for (const auto& [job, handles] : by_job_) notices_.try_emplace(job, std::nullopt);
  cv_.notify_one();
}

bool OutcomeWaiters::Waited(std::string_view queue, std::string_view id) const {
  if (count_.load() == 0) return false;
  std::lock_guard lock(mu_);
  return by_job_.contains(JobKey(queue, id));
}

void OutcomeWaiters::Close() {
  std::vector<JobCallback> answers;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    for (auto& [handle, w] : waiters_) answers.push_back(std::move(w.done));
    waiters_.clear();
    by_job_.clear();
    deadlines_.clear();
    notices_.clear();
    count_ = 0;
    cv_.notify_one();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  for (auto& done : answers) done(Closed());
}

// One thread answers: the jobs noticed, then the waits whose time is up, each job read once.
void OutcomeWaiters::Loop() {
  std::unique_lock lock(mu_);
  while (!closed_) {
    SleepLocked(lock);
    std::map<std::string, std::optional<JobState>> jobs = TakeWorkLocked();
    if (jobs.empty()) continue;
    lock.unlock();
    std::vector<Answer> answers;
    for (const auto& [job, notice] : jobs) {
      for (Answer& a : Settle(job, notice)) answers.push_back(std::move(a));
    }
    for (Answer& a : answers) a.done(std::move(a.job));
    lock.lock();
  }
}

// Until a notice, the earliest deadline or the retry of failed reads.
void OutcomeWaiters::SleepLocked(std::unique_lock<std::mutex>& lock) {
  if (!notices_.empty()) return;
  std::optional<Steady::time_point> until = retry_at_;
  // A copy: wait_until reads its deadline again after waking, when the entry may be gone (ASan
  // found the reference to the map's node read after a cancel had freed it).
  if (!deadlines_.empty() && (!until || deadlines_.begin()->first < *until)) until = deadlines_.begin()->first;
  if (until) {
    cv_.wait_until(lock, *until);
  } else {
    cv_.wait(lock);
  }
}

// The jobs to read now: those noticed, those whose waits are due, and failed reads due again.
std::map<std::string, std::optional<JobState>> OutcomeWaiters::TakeWorkLocked() {
  std::map<std::string, std::optional<JobState>> jobs;
  for (auto& [job, state] : notices_) jobs[job] = state;
  notices_.clear();
  const auto now = Steady::now();
  if (retry_at_ && *retry_at_ <= now) {
    for (auto& [job, state] : retries_) {
      if (by_job_.contains(job) && !jobs.contains(job)) jobs[job] = state;
    }
    retries_.clear();
    retry_at_.reset();
  }
  for (auto d = deadlines_.begin(); d != deadlines_.end() && d->first <= now; ++d) {
    jobs.try_emplace(waiters_.at(d->second).job, std::nullopt);
  }
  return jobs;
}

void OutcomeWaiters::RetryLocked(const std::string& job, std::optional<JobState> notice) {
  auto [it, added] = retries_.try_emplace(job, notice);
  if (!added && notice) it->second = notice;
  if (!retry_at_) retry_at_ = Steady::now() + std::chrono::milliseconds(kRetryReadMs);
}

// Reads `job` once and answers its waiters that the read settles: a final state, a job gone after
// its notice (as last seen, in the notice's state), or a wait whose time is up (the job as it is).
std::vector<OutcomeWaiters::Answer> OutcomeWaiters::Settle(const std::string& job, std::optional<JobState> notice) {
  const size_t nul = job.find('\0');
  const std::string queue = job.substr(0, nul), id = job.substr(nul + 1);
  std::vector<uint64_t> watched;  // before the read: a job found gone ended after the store knew of these
  {
    std::lock_guard lock(mu_);
    if (auto it = by_job_.find(job); it != by_job_.end()) {
      for (uint64_t handle : it->second) {
        if (waiters_.at(handle).watched) watched.push_back(handle);
      }
    }
  }
  auto read = hooks_.get(queue, JobRef{id, {}});
  const bool gone = !read.ok() && read.status().code() == Code::kNotFound;
  const bool final = read.ok() && IsFinal(read->state);
  std::vector<Answer> answers;
  std::lock_guard lock(mu_);
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return answers;
  if (!read.ok() && !gone) RetryLocked(job, notice);  // the waits not due are settled by a later read
  const auto now = Steady::now();
  for (uint64_t handle : std::vector<uint64_t>(it->second)) {
    const Waiter& w = waiters_.at(handle);
    const bool due = w.deadline <= now;
    // Gone without a notice (a recheck after the store's notices may have been lost: a new or
    // reconnected subscription): cancelled, once the store knew of the wait. CI saw a wait whose
    // cancel was announced before the store's subscription was taken run to its end.
    const bool ended = gone && (notice || std::find(watched.begin(), watched.end(), handle) != watched.end());
    if (!final && !due && !ended) continue;
    std::optional<Waiter> taken = TakeLocked(handle);
    Result<Job> outcome = read;
    if (gone) {
      // Deleted after its end (a cancel, or a queue deleted): as last seen, in that state.
      taken->last.state = notice.value_or(JobState::kCancelled);
      outcome = std::move(taken->last);
    }
    answers.push_back({std::move(taken->done), std::move(outcome)});
  }
  return answers;
}

}  // namespace delayq
