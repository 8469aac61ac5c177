#include "check/worker.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "check/history.h"
#include "delayq/client.h"

namespace delayq::check {
namespace {

std::atomic<bool> g_stop{false};

void OnTerm(int) { g_stop = true; }

const char* Name(Code c) {
  static thread_local std::string s;
  s = std::string(CodeName(c));
  return s.c_str();
}

// One delivery this worker holds, and when its "work" on it is done.
struct Held {
  std::string queue;
  Delivery d;
  int64_t finish_us = 0;
};

class Worker {
 public:
  explicit Worker(const WorkerOptions& o) : o_(o), rec_(o.history), rng_(o.seed) {
    const std::string& url = o.urls[Uniform(0, static_cast<int64_t>(o.urls.size()) - 1)];
    auto c = Client::Connect(url, {.timeout_ms = o.answer_within_ms});
    if (!c.ok()) throw std::runtime_error(c.status().ToString());
    client_ = std::move(*c);
  }

  int Run() {
    while (!g_stop && WallUs() < o_.until_us) {
      if (o_.admin) {
        AdminStep();
      } else {
        MixedStep();
      }
    }
    if (o_.admin) {
      for (const auto& q : paused_) Resume(q);
      // The schedule stops making runs, so the store can settle (its queue is not judged then).
      (void)client_->DeleteSchedule(kScheduleQueue, kScheduleName);
    }
    return 0;
  }

 private:
  // --- randomness ---
  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  const std::string& AnyQueue() {
    return o_.queues[static_cast<size_t>(Uniform(0, static_cast<int64_t>(o_.queues.size()) - 1))];
  }
  // Records an answer that is a count ({"n": ...}), or the error's code and message.
  static std::string CountAnswer(const Result<int64_t>& n, Json& r, std::string& m) {
    if (!n.ok()) {
      m = n.status().message();
      return std::string(Name(n.code()));
    }
    r["n"] = *n;
    return "ok";
  }

  std::string ForgedReceipt() {
    static const char* kB32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    std::string id = "0";
    for (int i = 1; i < 26; ++i) id += kB32[Uniform(0, 31)];
    if (!known_.empty() && Chance(0.5))
      id = known_[static_cast<size_t>(Uniform(0, static_cast<int64_t>(known_.size()) - 1))].second;
    // Shaped like a real receipt (id, 128-bit token, 64-bit tag), so only its tag gives it away.
    return fmt::format("{}.{:016x}{:016x}.{:016x}", id, static_cast<uint64_t>(Uniform(1, INT64_MAX)),
                       static_cast<uint64_t>(Uniform(1, INT64_MAX)), static_cast<uint64_t>(Uniform(1, INT64_MAX)));
  }

  // --- recording ---
  // Records the begin line, runs `call` (which fills `result` and returns the code), then the
  // end line. A transport failure shows as "unavailable"; a pause after one keeps a dead
  // server from being hammered.
  template <class F>
  std::string Do(const char* op, const std::string& queue, Json args, F&& call) {
    const int64_t n = ++seq_;
    Json begin = {{"k", "b"},      {"c", o_.id},          {"n", n}, {"op", op}, {"q", queue},
                  {"t", WallUs()}, {"a", std::move(args)}};
    rec_.Line(begin);
    Json result = Json::object();
    std::string message;
    std::string code = call(result, message);
    // The client gave up waiting (answer_within_ms, plus a reserve's wait): not an answer.
    if (code == "unavailable" && message.find("did not answer within") != std::string::npos) code = "no_answer";
    rec_.Line({{"k", "e"},
               {"c", o_.id},
               {"n", n},
               {"t", WallUs()},
               {"code", code},
               {"m", message.substr(0, 300)},
               {"r", result}});
    if (code == "unavailable") std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return code;
  }

  void Remember(const std::string& queue, const std::string& id) {
    known_.emplace_back(queue, id);
    if (known_.size() > 400) known_.pop_front();
  }

  // --- producing ---
  // Each job's payload is its own (worker, request, place in the batch): a delivery must carry
  // the payload of an enqueue of its job (verify.cc's "payload").
  EnqueueRequest NewJob(Json& arg, int index) {
    EnqueueRequest r;
    r.payload = fmt::format(R"({{"w":{},"n":{},"i":{}}})", o_.id, seq_ + 1, index);
    arg["p"] = r.payload;
    const double p = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (p < 0.25) {
      arg["d"] = nullptr;
    } else if (p < 0.9) {
      r.when.delay_ms = Uniform(0, o_.max_delay_ms);
      arg["d"] = *r.when.delay_ms;
    } else {
      r.when.deliver_at_ms = WallUs() / 1000 + Uniform(0, o_.max_delay_ms);
      arg["at"] = *r.when.deliver_at_ms;
    }
    if (Chance(0.3)) {
      r.key = fmt::format("k{}", Uniform(0, 39));
      r.replace = Chance(0.2);
      arg["key"] = r.key;
      arg["rep"] = r.replace;
    }
    if (Chance(0.3)) {
      r.max_attempts = static_cast<int32_t>(Uniform(1, 3));
      arg["max"] = *r.max_attempts;
    }
    return r;
  }

  void EnqueueJobs(int n) {
    const std::string queue = AnyQueue();
    std::vector<EnqueueRequest> jobs;
    Json args = {{"jobs", Json::array()}};
    for (int i = 0; i < n; ++i) {
      Json a = Json::object();
      jobs.push_back(NewJob(a, i));
      args["jobs"].push_back(a);
    }
    Do("enqueue", queue, args, [&](Json& r, std::string& m) {
      Result<std::vector<EnqueueResult>> res = Status::Internal("unset");
      if (n == 1) {
        auto one = client_->Enqueue(queue, jobs[0]);
        res = one.ok() ? Result<std::vector<EnqueueResult>>(std::vector<EnqueueResult>{*one})
                       : Result<std::vector<EnqueueResult>>(one.status());
      } else {
        res = client_->EnqueueBatch(queue, jobs);
      }
      if (!res.ok()) {
        m = res.status().message();
        return std::string(Name(res.code()));
      }
      r["jobs"] = Json::array();
      for (const auto& e : *res) {
        r["jobs"].push_back({{"id", e.id}, {"due", e.due_at_ms}, {"dup", e.duplicate}, {"rep", e.replaced}});
        Remember(queue, e.id);
      }
      return std::string("ok");
    });
  }

  // --- consuming ---
  void Reserve(int64_t max_wait_ms) {
    const std::string queue = AnyQueue();
    const int32_t max = Chance(0.7) ? static_cast<int32_t>(Uniform(1, 4)) : static_cast<int32_t>(Uniform(5, 16));
    const int64_t wait = Chance(0.75) ? Uniform(0, max_wait_ms) : 0;
    const int64_t lease = Uniform(1000, 4000);
    Do("reserve", queue, {{"max", max}, {"wait", wait}, {"lease", lease}}, [&](Json& r, std::string& m) {
      auto got = client_->Reserve(queue, {max, wait, lease});
      if (!got.ok()) {
        m = got.status().message();
        return std::string(Name(got.code()));
      }
      r["d"] = Json::array();
      for (auto& d : *got) {
        r["d"].push_back({{"id", d.id},
                          {"rc", d.receipt},
                          {"att", d.attempt},
                          {"max", d.max_attempts},
                          {"due", d.due_at_ms},
                          {"ld", d.lease_deadline_ms},
                          {"key", d.key},
                          {"p", d.payload}});
        Remember(queue, d.id);
        // Work mostly takes up to 200 ms; now and then up to 1.3 leases, so that some leases
        // run out before the answer.
        const int64_t work_ms = Chance(0.9) ? Uniform(0, 200) : Uniform(0, lease * 13 / 10);
        held_.push_back({queue, d, WallUs() + work_ms * 1000});
      }
      return std::string("ok");
    });
  }

  void Past(const std::string& queue, const std::string& receipt) {
    past_.emplace_back(queue, receipt);
    if (past_.size() > 200) past_.pop_front();
  }

  // Each ack carries a result of its own ({"c": worker, "n": request}, the same for each receipt
  // of one request): a completed job must show the result of an ack of it that went well.
  std::string Ack(const std::string& queue, std::vector<std::string> receipts, const char* why) {
    const std::string result = fmt::format(R"({{"c":{},"n":{}}})", o_.id, seq_ + 1);
    return Do("ack", queue, {{"rc", receipts}, {"why", why}, {"res", result}}, [&](Json& r, std::string& m) {
      std::vector<AckRequest> acks;
      for (const auto& rc : receipts) acks.push_back({rc, result});
      std::vector<Status> st =
          acks.size() == 1 ? std::vector<Status>{client_->Ack(queue, acks[0])} : client_->AckBatch(queue, acks);
      r["codes"] = Json::array();
      std::string code = "ok";
      for (const auto& s : st) {
        r["codes"].push_back(Name(s.code()));
        if (!s.ok()) {
          m = s.message();
          code = code == "ok" || code == Name(s.code()) ? Name(s.code()) : "mixed";
        }
      }
      // One failed receipt among good ones: the call itself was answered.
      if (code != "ok" && std::any_of(st.begin(), st.end(), [](const Status& s) { return s.ok(); })) code = "mixed";
      return code;
    });
  }

  std::string Nack(const std::string& queue, const std::string& receipt, const char* why) {
    NackRequest n;
    n.receipt = receipt;
    Json a = {{"rc", receipt}, {"why", why}};
    if (Chance(0.5)) {
      n.retry_in_ms = Uniform(0, 1500);
      a["retry"] = *n.retry_in_ms;
    }
    n.dead = Chance(0.1);
    a["dead"] = n.dead;
    n.error = "checker nack";
    return Do("nack", queue, a, [&](Json& r, std::string& m) {
      auto res = client_->Nack(queue, n);
      if (!res.ok()) {
        m = res.status().message();
        return std::string(Name(res.code()));
      }
      r["state"] = JobStateName(res->state);
      r["due"] = res->due_at_ms;
      return std::string("ok");
    });
  }

  std::string Touch(const std::string& queue, const std::string& receipt, int64_t lease, const char* why) {
    // Every other touch reports a progress too: the touch's rules (a stale receipt refused, the
    // lease moved) hold with one as without.
    std::optional<std::string> progress;
    if (Uniform(0, 1) == 1) progress = fmt::format(R"({{"why":"{}","lease":{}}})", why, lease);
    return Do("touch", queue, {{"rc", receipt}, {"lease", lease}, {"why", why}}, [&](Json& r, std::string& m) {
      auto res = client_->Touch(queue, TouchRequest{receipt, lease, progress});
      if (!res.ok()) {
        m = res.status().message();
        return std::string(Name(res.code()));
      }
      r["ld"] = res->lease_deadline_ms;
      return std::string("ok");
    });
  }

  // Ends the delivery of one held job whose work is done.
  void Finish(size_t index) {
    Held h = held_[index];
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(index));
    const double p = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (p < 0.68) {
      std::vector<std::string> receipts = {h.d.receipt};
      // Others that are done too go in the same batch, and sometimes a receipt twice.
      for (size_t i = 0; i < held_.size() && receipts.size() < 4;) {
        if (held_[i].queue == h.queue && held_[i].finish_us <= WallUs() && Chance(0.5)) {
          receipts.push_back(held_[i].d.receipt);
          Past(h.queue, held_[i].d.receipt);
          held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      if (Chance(0.1)) receipts.push_back(receipts[0]);
      Ack(h.queue, receipts, "finish");
    } else if (p < 0.9) {
      Nack(h.queue, h.d.receipt, "finish");
    } else if (p < 0.95) {
      // Abandoned, as by a consumer that crashed: the lease runs out and the job comes back.
    } else {
      const int64_t lease = Uniform(1000, 4000);
      if (Touch(h.queue, h.d.receipt, lease, "extend") == "ok") {
        h.finish_us = WallUs() + Uniform(0, lease) * 1000;
        held_.push_back(h);
        return;
      }
    }
    Past(h.queue, h.d.receipt);
  }

  // Receipts that are stale (an earlier delivery) or forged must never act on a job.
  void BadReceipt() {
    std::string queue, receipt;
    const char* why;
    if (!past_.empty() && Chance(0.6)) {
      std::tie(queue, receipt) = past_[static_cast<size_t>(Uniform(0, static_cast<int64_t>(past_.size()) - 1))];
      why = "stale";
    } else {
      queue = AnyQueue();
      receipt = ForgedReceipt();
      why = "forged";
    }
    const double p = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (p < 0.5) {
      Ack(queue, {receipt}, why);
    } else if (p < 0.8) {
      Nack(queue, receipt, why);
    } else {
      Touch(queue, receipt, 2000, why);
    }
  }

  JobRef SomeRef(std::string* queue, Json& a) {
    if (!known_.empty() && Chance(0.7)) {
      auto& [q, id] = known_[static_cast<size_t>(Uniform(0, static_cast<int64_t>(known_.size()) - 1))];
      *queue = q;
      a["id"] = id;
      return JobRef::ById(id);
    }
    *queue = AnyQueue();
    std::string key = fmt::format("k{}", Uniform(0, 39));
    a["key"] = key;
    return JobRef::ByKey(key);
  }

  void ByRef() {
    std::string queue;
    Json a = Json::object();
    JobRef ref = SomeRef(&queue, a);
    const double p = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (p < 0.3) {
      Do("cancel", queue, a, [&](Json&, std::string& m) {
        Status s = client_->Cancel(queue, ref);
        m = s.message();
        return std::string(Name(s.code()));
      });
    } else if (p < 0.6) {
      When when;
      when.delay_ms = Uniform(0, o_.max_delay_ms);
      a["d"] = *when.delay_ms;
      Do("reschedule", queue, a, [&](Json& r, std::string& m) {
        auto job = client_->Reschedule(queue, ref, when);
        if (!job.ok()) {
          m = job.status().message();
          return std::string(Name(job.code()));
        }
        r = {{"id", job->id}, {"due", job->due_at_ms}, {"state", JobStateName(job->state)}, {"att", job->attempt}};
        return std::string("ok");
      });
    } else if (p < 0.8) {
      // Half the waits are for one of the last jobs this worker enqueued or took, most of them
      // still live, so that an answer before the job's end or the wait's is seen (check-mutants'
      // outcome-early went unseen on a slow run: its few waits were mostly for jobs long gone).
      if (!known_.empty() && Chance(0.5)) {
        const size_t back = static_cast<size_t>(Uniform(1, std::min<int64_t>(8, static_cast<int64_t>(known_.size()))));
        auto& [q, id] = known_[known_.size() - back];
        queue = q;
        a = {{"id", id}};
        ref = JobRef::ById(id);
      }
      Wait(queue, ref, a);
    } else {
      Do("get", queue, a, [&](Json& r, std::string& m) {
        auto job = client_->Get(queue, ref);
        if (!job.ok()) {
          m = job.status().message();
          return std::string(Name(job.code()));
        }
        r = {{"id", job->id},       {"due", job->due_at_ms},    {"state", JobStateName(job->state)},
             {"att", job->attempt}, {"max", job->max_attempts}, {"key", job->key}};
        return std::string("ok");
      });
    }
  }

  // A wait for the job's outcome, up to a second: answered at the job's end (completed with its
  // result, dead, cancelled) or at the wait's end with the job as it then is.
  void Wait(const std::string& queue, const JobRef& ref, Json a) {
    const int64_t wait = Uniform(0, 1'000);
    a["wait"] = wait;
    Do("wait", queue, a, [&](Json& r, std::string& m) {
      auto job = client_->WaitOutcome(queue, ref, wait);
      if (!job.ok()) {
        m = job.status().message();
        return std::string(Name(job.code()));
      }
      r = {{"id", job->id}, {"state", JobStateName(job->state)}, {"att", job->attempt}, {"key", job->key}};
      if (job->state == JobState::kCompleted) r["result"] = job->result;
      return std::string("ok");
    });
  }

  // Requests that must fail, each with the code it must get.
  void MustFail() {
    const std::string queue = AnyQueue();
    const int kind = static_cast<int>(Uniform(0, 6));
    auto fail = [&](const char* name, auto&& call) {
      Do("must_fail", queue, {{"kind", name}}, [&](Json&, std::string& m) {
        Status s = call();
        m = s.message();
        return std::string(Name(s.code()));
      });
    };
    switch (kind) {
      case 0: fail("stats of a queue that does not exist", [&] { return client_->Stats("chk.none").status(); }); break;
      case 1: fail("ack of a malformed receipt", [&] { return client_->Ack(queue, "not-a-receipt"); }); break;
      case 2:
        fail("enqueue beyond max_delay", [&] {
          return client_->Enqueue(queue, {.payload = "1", .when = {.delay_ms = 400LL * 86'400'000}}).status();
        });
        break;
      case 3:
        fail("touch with a 10 ms lease", [&] { return client_->Touch(queue, ForgedReceipt(), 10).status(); });
        break;
      case 4:
        fail("cancel of a job that does not exist",
             [&] { return client_->Cancel(queue, JobRef::ById("01ARZ3NDEKTSV4RRFFQ69G5FAV")); });
        break;
      case 5:
        fail("replay of a malformed id",
             [&] { return client_->ReplayDead(queue, std::vector<std::string>{"bad id"}).status(); });
        break;
      default:
        fail("nack with a negative retry", [&] { return client_->Nack(queue, {ForgedReceipt(), -5}).status(); });
        break;
    }
  }

  void MixedStep() {
    // Work that is done is answered first.
    for (size_t i = 0; i < held_.size(); ++i) {
      if (held_[i].finish_us <= WallUs()) return Finish(i);
    }
    if (held_.size() >= kMaxHeld) {  // busy: the work on the held jobs takes its time
      int64_t next = INT64_MAX;
      for (const auto& h : held_) next = std::min(next, h.finish_us);
      std::this_thread::sleep_for(std::chrono::microseconds(std::max<int64_t>(0, next - WallUs())));
      return;
    }
    const double p = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (p < 0.25) {
      // Producing is paced (kJobsPerSecond per worker) so that the consumers keep up: the
      // lateness bound holds below capacity only.
      const int n = Chance(0.2) ? static_cast<int>(Uniform(2, 10)) : 1;
      const int64_t now = WallUs();
      budget_ = std::min<double>(kJobsPerSecond, budget_ + (now - budget_at_) / 1e6 * kJobsPerSecond);
      budget_at_ = now;
      if (budget_ >= n) {
        budget_ -= n;
        return EnqueueJobs(n);
      }
    }
    if (p < 0.78) {
      int64_t next_finish = INT64_MAX;
      for (const auto& h : held_) next_finish = std::min(next_finish, h.finish_us);
      const int64_t until_finish =
          next_finish == INT64_MAX ? 1500 : std::max<int64_t>(0, (next_finish - WallUs()) / 1000);
      return Reserve(std::min<int64_t>(1500, until_finish));
    }
    if (p < 0.83) return BadReceipt();
    if (p < 0.93) return ByRef();
    if (p < 0.96 && !held_.empty()) {
      auto& h = held_[static_cast<size_t>(Uniform(0, static_cast<int64_t>(held_.size()) - 1))];
      (void)Touch(h.queue, h.d.receipt, Uniform(1000, 4000), "extend");
      return;
    }
    MustFail();
  }

  // --- administration ---
  void Resume(const std::string& queue) {
    Do("resume", queue, Json::object(), [&](Json&, std::string& m) {
      Status s = client_->Resume(queue);
      m = s.message();
      return std::string(Name(s.code()));
    });
  }

  // --- administration beside the traffic: schedules, limits, queue deletes ---
  // A schedule on a queue of its own (kScheduleQueue), changed in every way while it runs; the
  // admin takes its runs (op "sched_reserve") so that verify.cc can hold them to the schedule's
  // history: never early, once per run, none after a delete or pause.
  void ScheduleStep() {
    const double p = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (p < 0.45) {
      Do("sched_reserve", kScheduleQueue, {{"lease", 3000}}, [&](Json& r, std::string& m) {
        auto got = client_->Reserve(kScheduleQueue, {16, 0, 3000});
        if (!got.ok()) {
          m = got.status().message();
          return std::string(Name(got.code()));
        }
        r["d"] = Json::array();
        for (auto& d : *got) {
          r["d"].push_back(
              {{"id", d.id}, {"key", d.key}, {"att", d.attempt}, {"due", d.due_at_ms}, {"ld", d.lease_deadline_ms}});
          (void)client_->Ack(kScheduleQueue, d.receipt);
        }
        return std::string("ok");
      });
      return;
    }
    if (p < 0.65) {
      ScheduleSpec spec;
      spec.name = kScheduleName;
      spec.every_ms = Chance(0.5) ? 1'000 : 2'000;
      spec.misfire = Chance(0.5) ? Misfire::kSkip : Misfire::kRunOnce;
      spec.payload = fmt::format(R"({{"admin":{}}})", seq_ + 1);
      Do("schedule_put", kScheduleQueue, {{"every", spec.every_ms}}, [&](Json& r, std::string& m) {
        auto put = client_->PutSchedule(kScheduleQueue, spec);
        if (!put.ok()) {
          m = put.status().message();
          return std::string(Name(put.code()));
        }
        r["next"] = put->next_runs;
        return std::string("ok");
      });
    } else if (p < 0.75) {
      Do("schedule_pause", kScheduleQueue, Json::object(), [&](Json&, std::string& m) {
        Status s = client_->PauseSchedule(kScheduleQueue, kScheduleName, true).status();
        m = s.message();
        return std::string(Name(s.code()));
      });
    } else if (p < 0.85) {
      Do("schedule_resume", kScheduleQueue, Json::object(), [&](Json&, std::string& m) {
        Status s = client_->PauseSchedule(kScheduleQueue, kScheduleName, false).status();
        m = s.message();
        return std::string(Name(s.code()));
      });
    } else if (p < 0.93) {
      Do("schedule_delete", kScheduleQueue, Json::object(), [&](Json&, std::string& m) {
        Status s = client_->DeleteSchedule(kScheduleQueue, kScheduleName);
        m = s.message();
        return std::string(Name(s.code()));
      });
    } else {
      // The schedule's queue takes delays of 3 to 60 s: its runs are made only that far ahead.
      QueueConfig c;
      c.max_delay_ms = Uniform(3'000, 60'000);
      Do("config", kScheduleQueue, {{"max_delay", c.max_delay_ms}}, [&](Json&, std::string& m) {
        Status s = client_->SetConfig(kScheduleQueue, c);
        m = s.message();
        return std::string(Name(s.code()));
      });
    }
  }

  // A queue of its own (kScratchQueue) filled, refused a plain delete while it holds jobs, then
  // deleted with force: afterwards it does not exist, and nothing a refused request asked made it.
  // Each must_fail is asked only where its premise held: a fault can refuse the enqueues (then the
  // queue may be empty) or the delete (then the queue rightly still exists); a probe judged on a
  // premise that failed was a false anomaly under a Redis failover.
  void DeleteQueueStep() {
    const int n = static_cast<int>(Uniform(1, 3));
    int enqueued = 0;
    bool in_doubt = false;  // an enqueue without a clear answer may still land after the delete
    for (int i = 0; i < n; ++i) {
      auto e = client_->Enqueue(kScratchQueue, {.payload = "1", .when = {.delay_ms = 60'000}});
      enqueued += e.ok() ? 1 : 0;
      in_doubt =
          in_doubt || e.code() == Code::kUnavailable || e.code() == Code::kIoError || e.code() == Code::kInternal;
    }
    if (enqueued > 0) {
      Do("must_fail", kScratchQueue, {{"kind", "delete of a queue that holds jobs"}}, [&](Json&, std::string& m) {
        Status s = client_->DeleteQueue(kScratchQueue, false).status();
        m = s.message();
        return std::string(Name(s.code()));
      });
    }
    const std::string deleted = Do("delete_queue", kScratchQueue, {{"force", true}}, [&](Json& r, std::string& m) {
      return CountAnswer(client_->DeleteQueue(kScratchQueue, true), r, m);
    });
    // In doubt (a fault): the queue may rightly still be there. Any other answer leaves it gone.
    if (in_doubt || deleted.empty() || deleted == "unavailable" || deleted == "io_error" || deleted == "internal" ||
        deleted == "no_answer") {
      return;
    }
    Do("must_fail", kScratchQueue, {{"kind", "stats of a queue just deleted"}}, [&](Json&, std::string& m) {
      Status s = client_->Stats(kScratchQueue).status();
      m = s.message();
      return std::string(Name(s.code()));
    });
    Do("must_fail", kScratchQueue, {{"kind", "an enqueue refused for its group, then stats"}},
       [&](Json&, std::string& m) {
         EnqueueRequest bad{.payload = "1"};
         bad.group = std::string(200, 'g');
         (void)client_->Enqueue(kScratchQueue, bad);
         Status s = client_->Stats(kScratchQueue).status();  // the refusal made no queue
         m = s.message();
         return std::string(Name(s.code()));
       });
  }

  void AdminStep() {
    std::this_thread::sleep_for(std::chrono::milliseconds(Uniform(20, 100)));  // pacing, not sync
    if (Chance(0.3)) return ScheduleStep();
    if (Chance(0.02)) return DeleteQueueStep();
    const std::string queue = AnyQueue();
    // A pause lasts 100-800 ms.
    for (auto it = paused_.begin(); it != paused_.end(); ++it) {
      if (WallUs() >= pause_until_[*it]) {
        std::string q = *it;
        paused_.erase(it);
        return Resume(q);
      }
    }
    const double p = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (p < 0.12) {
      if (std::find(paused_.begin(), paused_.end(), queue) != paused_.end()) return;
      Do("pause", queue, Json::object(), [&](Json&, std::string& m) {
        Status s = client_->Pause(queue);
        m = s.message();
        return std::string(Name(s.code()));
      });
      paused_.push_back(queue);
      pause_until_[queue] = WallUs() + Uniform(100, 800) * 1000;
    } else if (p < 0.25) {
      QueueConfig c;
      c.max_attempts = static_cast<int32_t>(Uniform(2, 5));
      c.lease_ms = Uniform(1000, 4000);
      c.backoff.base_ms = Uniform(50, 500);
      c.backoff.max_ms = 3000;
      c.backoff.jitter = 0.2;
      // Limits, half the time, that the traffic stays under (it is paced below them): set and
      // lifted beside waiting reserves, they must hold nothing back and keep no waiter waiting.
      if (Chance(0.5)) {
        c.rate_per_s = static_cast<double>(Uniform(2'000, 10'000));
        c.burst = Uniform(500, 2'000);
        c.max_reserved = Uniform(500, 2'000);
      }
      c.max_delay_ms = Uniform(o_.max_delay_ms, 3'600'000);  // every delay the workers ask stays allowed
      c.keep_completed_ms = StartConfig::KeepCompletedMs(queue);
      Do("config", queue,
         {{"max", c.max_attempts},
          {"lease", c.lease_ms},
          {"base", c.backoff.base_ms},
          {"rate", c.rate_per_s},
          {"max_reserved", c.max_reserved},
          {"max_delay", c.max_delay_ms}},
         [&](Json&, std::string& m) {
           Status s = client_->SetConfig(queue, c);
           m = s.message();
           return std::string(Name(s.code()));
         });
    } else if (p < 0.45) {
      Do("dead_list", queue, {{"limit", 100}}, [&](Json& r, std::string& m) {
        auto jobs = client_->ListDead(queue, 100);
        if (!jobs.ok()) {
          m = jobs.status().message();
          return std::string(Name(jobs.code()));
        }
        r["jobs"] = Json::array();
        dead_[queue].clear();
        for (const auto& j : *jobs) {
          r["jobs"].push_back({{"id", j.id}, {"att", j.attempt}, {"max", j.max_attempts}, {"key", j.key}});
          dead_[queue].push_back(j.id);
        }
        return std::string("ok");
      });
    } else if (p < 0.60) {
      std::vector<std::string> ids;
      if (!dead_[queue].empty() && Chance(0.6)) {
        auto& d = dead_[queue];
        for (int i = 0; i < 5; ++i)
          ids.push_back(d[static_cast<size_t>(Uniform(0, static_cast<int64_t>(d.size()) - 1))]);
      }
      Do("replay", queue, {{"ids", ids}},
         [&](Json& r, std::string& m) { return CountAnswer(client_->ReplayDead(queue, ids), r, m); });
    } else if (p < 0.63) {
      Do("purge", queue, Json::object(),
         [&](Json& r, std::string& m) { return CountAnswer(client_->PurgeDead(queue), r, m); });
    } else if (p < 0.85) {
      Do("stats", queue, Json::object(), [&](Json& r, std::string& m) {
        auto s = client_->Stats(queue);
        if (!s.ok()) {
          m = s.status().message();
          return std::string(Name(s.code()));
        }
        r = {{"scheduled", s->scheduled}, {"ready", s->ready}, {"reserved", s->reserved}, {"dead", s->dead}};
        return std::string("ok");
      });
    } else {
      MustFail();
    }
  }

  static constexpr const char* kScheduleQueue = "chk.s";
  static constexpr const char* kScheduleName = "tick";
  static constexpr const char* kScratchQueue = "chk.tmp";
  static constexpr size_t kMaxHeld = 24;
  static constexpr double kJobsPerSecond = 60;

  const WorkerOptions o_;
  double budget_ = 0;
  int64_t budget_at_ = WallUs();
  Recorder rec_;
  std::mt19937_64 rng_;
  std::unique_ptr<Client> client_;
  int64_t seq_ = 0;
  std::vector<Held> held_;
  std::deque<std::pair<std::string, std::string>> past_;   // (queue, receipt) of ended deliveries
  std::deque<std::pair<std::string, std::string>> known_;  // (queue, id) seen lately
  std::vector<std::string> paused_;
  std::map<std::string, int64_t> pause_until_;
  std::map<std::string, std::vector<std::string>> dead_;
};

}  // namespace

int RunWorker(const WorkerOptions& options) {
  struct sigaction sa {};
  sa.sa_handler = OnTerm;
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Worker w(options);
  return w.Run();
}

}  // namespace delayq::check
