// Runs the recurring schedules of one store (docs/http-api.md, Recurring schedules): the schedule calls of the Queue
// interface (put, get, list, delete, pause, resume) and a thread that keeps each schedule's coming occurrences made
// into jobs. Every store owns one and answers its Queue schedule calls with it; the rules live here once, over the
// Queue interface and the few ScheduleStore calls.
//
// How an occurrence becomes exactly one job, with any number of servers on one store:
//   - Occurrences are made into jobs ahead of time: every occurrence up to now + lead_ms, and
//     always the next one, so each is delivered at its time by the store's scheduler, and a server
//     that stops leaves the next lead_ms of jobs behind it.
//   - Each job has the key "schedule:{name}:{ms}": two servers making the same future occurrence
//     make one job (the second enqueue is a duplicate of the live job).
//   - The schedule's state (handled_until, pending) changes only by compare-and-set on its
//     generation, so no server moves it back; a server that lost the race reads it again.
//   - Occurrences missed while no server ran (handled_until < now) follow the misfire rule. Their
//     jobs are due at once, so two servers could both make one that is already acked: these are
//     claimed by compare-and-set before they are enqueued (one server makes them; if that server
//     dies between the two steps, they are lost, as the misfire rule loses missed runs anyway).
//   - A pass claims its coming runs (records them in `pending` by compare-and-set) before it
//     makes them, then checks the schedule is still the revision it made them for: a change that
//     came between cancelled the claimed runs before they existed, so the pass takes back what it
//     made. A pass that died between claiming and making leaves runs the next pass makes: a
//     claimed run still to come is made if a look by its key, ended before its time (less a
//     margin for the store's clock), finds no job; made jobs exist until they are due, so such a
//     run was never made (ClaimedButNeverMade). One server's passes run one at a time, so none
//     takes another's runs in flight for a dead pass's. Across servers one window is left: server
//     B makes the runs server A claimed while A is still making them, and A's enqueue lands after
//     B's job of the same run was due, delivered and acked, so the run is delivered twice. A
//     store that refused such an enqueue atomically would close it.
//   - Replacing, pausing or deleting a schedule cancels its jobs that are not yet due. The change
//     first moves them from `pending` to `cancelling` in the same compare-and-set as itself, then
//     cancels them and clears `cancelling`: a server that dies in between leaves them named, and
//     the next writer (any server's pass, a delete) cancels them. A run's job carries the
//     revision that made it (header delayq-schedule-rev), so a replace that shares run keys with
//     the revision it replaced cancels the old jobs, never the new. A cancel that fails (the store
//     unreachable) leaves the runs named; one that comes due before it could be cancelled runs as
//     the old revision's job, and the schedule counts its moment handled, so that the new revision
//     does not make that moment again as a missed run.
//
// Thread-safe. The thread only calls the store's public operations.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "delayq/clock.h"
#include "delayq/queue.h"
#include "delayq/schedule.h"
#include "schedule/occurrences.h"
#include "schedule/schedule_store.h"

namespace delayq {

class ScheduleRunner {
 public:
  ScheduleRunner(Queue& queue, ScheduleStore& store, std::shared_ptr<Clock> clock, ScheduleRunnerOptions options = {});
  ~ScheduleRunner();
  ScheduleRunner(const ScheduleRunner&) = delete;
  ScheduleRunner& operator=(const ScheduleRunner&) = delete;

  // Starts the thread (after the store recovered); Stop ends it (idempotent, before the store
  // closes).
  void Start();
  void Stop();

  // The Queue interface's schedule calls (delayq/queue.h says what each answers).
  Result<RecurringSchedule> Put(std::string_view queue, const ScheduleSpec& spec);
  Result<RecurringSchedule> Get(std::string_view queue, std::string_view name);
  Result<std::vector<RecurringSchedule>> List(std::string_view queue);
  Status Delete(std::string_view queue, std::string_view name);
  Result<RecurringSchedule> SetPaused(std::string_view queue, std::string_view name, bool paused);

  // Whether `config` would accept the runs of every schedule of `queue` (a config change must
  // not refuse them): ok, or kConflict naming the schedule and what the config would refuse.
  Status CheckConfig(std::string_view queue, const QueueConfig& config);

  // One pass over one schedule: makes its missed and coming occurrences into jobs. Returns when it
  // should run again (nothing: it ended, is paused or is gone). The thread's work; tests call it.
  Result<std::optional<int64_t>> Materialize(std::string_view queue, std::string_view name);

 private:
  using Id = std::pair<std::string, std::string>;  // queue, name
  RecurringSchedule View(const StoredSchedule& s, const Occurrences& occurrences, int64_t now_ms) const;
  // The schedule, or kNotFound naming it.
  Result<StoredSchedule> LoadExisting(const std::string& queue, std::string_view name);
  Status CancelRuns(const std::string& queue, const std::string& name, const std::vector<int64_t>& runs,
                    const std::string& keep, int64_t now);
  static Status Unfinished(const std::string& name, const std::string& queue, int64_t at, const Status& why);
  Status FinishCancelling(StoredSchedule& s);
  static void TakeOffComing(StoredSchedule& next, int64_t now);
  // Makes `occurrences` into jobs of the schedule (one batch). Their due times are the
  // occurrences (those past are due at once).
  Status Enqueue(const StoredSchedule& s, const std::vector<int64_t>& occurrences);
  // A run made into a job by this pass (not found made already): its job id and occurrence.
  struct Made {
    std::string id;
    int64_t at = 0;
  };
  // What one pass makes of a schedule's coming runs.
  struct ComingPlan {
    std::vector<int64_t> coming;  // new runs, to claim and make
    std::vector<int64_t> again;   // runs claimed before and still to come: made again if missing
    bool capped = false;          // max_per_pass reached: more to make at once
    bool ended = false;           // no run is left (end_at passed)
    int64_t lead = 0;             // how far ahead runs are made (lead_ms, or less: max_delay_ms)
    std::optional<int64_t> wake;  // when nothing is to make now: when to look again
  };
  // The start a put or resume stored, when no pass has run since and it is within the lead: the
  // pass makes the runs from there, late, instead of judging them missed.
  std::optional<int64_t> FreshStart(const StoredSchedule& s, int64_t now) const;
  Status ClaimMissed(StoredSchedule& s, const Occurrences& occurrences, int64_t now);
  // The runs from max(handled_until, from_at_least) up to now + lead (those past are due at once).
  ComingPlan PlanComing(const StoredSchedule& s, const Occurrences& occurrences, int64_t now, int64_t from_at_least);
  // Makes the runs into jobs; answers those this call made (not found made already). A new run
  // (`coming`) whose key names another revision's orphan takes the run over (TakeOver).
  Result<std::vector<Made>> MakeRuns(const StoredSchedule& s, const std::vector<int64_t>& coming,
                                     const std::vector<int64_t>& again);
  bool ClaimedButNeverMade(const StoredSchedule& s, int64_t at);
  bool TakeOver(const StoredSchedule& s, const std::string& revision, const std::string& id);
  // Cancels the runs a pass made that are not yet due when the schedule is no longer the
  // revision they were made for (replaced, paused, deleted meanwhile).
  void AbandonIfChanged(const StoredSchedule& made_for, const std::vector<Made>& made);
  void MakeClaimed(std::string_view queue, std::string_view name);
  void Abandon(const std::string& queue, const std::string& name, const std::vector<Made>& made);
  void Wake(const Id& id, int64_t at_ms);
  void Loop();

  Queue& queue_;
  ScheduleStore& store_;
  std::shared_ptr<Clock> clock_;
  const ScheduleRunnerOptions options_;

  // Held through each pass (Materialize, MakeClaimed): a pass of this server never sees the runs
  // another pass of this server claimed and has not made yet, which it would take for runs a
  // dead pass left, make, and see delivered and acked before the other pass's enqueue made them
  // a second time (ScheduledRunsAreDeliveredOnceEachAtTheirTime, a put beside the thread's pass).
  std::mutex passes_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool poked_ = false;
  std::map<Id, int64_t> wake_at_;       // when each known schedule is looked at next (wall ms)
  std::map<Id, uint64_t> generations_;  // each one's generation at the last refresh
  std::thread thread_;
  uint64_t clock_listener_ = 0;
};

}  // namespace delayq
