#include "check/verify.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "check/worker.h"

namespace delayq::check {
namespace {

constexpr int64_t kNever = INT64_MAX;

// An answer that leaves open whether the request took effect.
bool Doubtful(const std::string& code) {
  return code.empty() || code == "unavailable" || code == "io_error" || code == "internal" || code == "no_answer";
}

// The latest moment an operation may have taken effect: its answer, or never for one that got
// none or whose client gave up waiting ("no_answer"): a server that was stopped, not killed,
// carries out the request when it runs again (found: a replay sent as the delayq server was
// stopped made a dead job due 6 s later, after its client had given up).
int64_t EffectEnd(const Op& op) { return op.answered() && op.code != "no_answer" ? op.t1 : kNever; }

std::string IdOf(const std::string& receipt) { return receipt.substr(0, std::min<size_t>(26, receipt.size())); }

struct DeliveryRec {
  const Op* reserve = nullptr;
  std::string id, receipt, queue;
  int64_t attempt = 0, max = 0;
  int64_t due = 0, deadline = 0, lease_ms = 0;
  int64_t lease_end = 0;               // the deadline, as set again by the last touch that answered ok
  std::optional<std::string> payload;  // as delivered (histories before payloads were recorded: none)
  bool acked = false, nacked = false;
  bool unsure = false;                                // a nack or touch of it is in doubt
  int64_t at() const { return deadline - lease_ms; }  // when it was handed out (store's clock, ms)
};

struct Trace {
  std::string id, queue, key;
  const Op* created = nullptr;
  std::vector<size_t> deliveries;
  std::vector<const Op*> ops;
  std::set<int64_t> dues;
  bool due_unknown = false;
  int64_t removed_ok_t1 = kNever;  // first ack or cancel by id that answered ok
  bool removed_in_doubt = false;
  bool cancelled_ok = false;          // a cancel by id answered ok
  std::set<std::string> ack_results;  // of its acks that answered ok or in doubt
  std::vector<const Op*> waits;       // for its outcome
  bool may_be_dead = false;
  int64_t max_asked = 0;           // max_attempts its enqueue asked for (0: the queue's default)
  std::set<std::string> payloads;  // of the enqueues that named it, and of replaces by its key in doubt
};

class Verifier {
 public:
  Verifier(const History& h, const FinalState& f, const VerifyOptions& o) : h_(h), f_(f), o_(o) {
    origin_ = h.ops.empty() ? 0 : h.ops.front().t0;
  }

  Report Run() {
    Index();
    CheckAnswers();
    CheckDeliveries();
    CheckJobs();
    CheckWaits();
    CheckPayloads();
    CheckPauses();
    CheckKeys();
    CheckCounts();
    CheckLateness();
    CheckSchedules();
    r_.jobs = static_cast<int64_t>(traces_.size());
    r_.deliveries = static_cast<int64_t>(deliveries_.size());
    r_.faults = static_cast<int64_t>(h_.faults.size());
    return r_;
  }

 private:
  Trace& T(const std::string& id, const std::string& queue) {
    Trace& t = traces_[id];
    if (t.id.empty()) {
      t.id = id;
      t.queue = queue;
    }
    return t;
  }

  bool InFault(int64_t t0, int64_t t1) const {
    for (const Fault& f : h_.faults) {
      if (t0 <= f.t1 + o_.fault_grace_us && t1 >= f.t0) return true;
    }
    return false;
  }

  std::string Line(const Op& op) const {
    std::string res = op.result.is_null() || op.result.empty() ? "" : " " + op.result.dump();
    if (res.size() > 400) res = res.substr(0, 400) + "…";
    std::string args = op.args.is_null() || op.args.empty() ? "" : " " + op.args.dump();
    if (args.size() > 300) args = args.substr(0, 300) + "…";
    return fmt::format("  +{:.3f}s c{}#{} {} {}{} -> {}{}{}", (op.t0 - origin_) / 1e6, op.client, op.seq, op.op,
                       op.queue, args, op.answered() ? op.code : "(no answer)",
                       op.answered() ? fmt::format(" after {:.1f} ms", (op.t1 - op.t0) / 1e3) : "", res);
  }

  // What a lost write looks like: in a mode that loses writes by design (a Redis that fsyncs
  // every second restarted, a failover to a lagging replica, power loss without sync), these
  // are counted as the loss's effects instead of failing the run.
  static bool LossEffect(const std::string& kind) {
    return kind == "lost" || kind == "resurrected" || kind == "lease" || kind == "stale" || kind == "due" ||
           kind == "attempts" || kind == "schedule" || kind == "pause";
  }

  void Add(const std::string& kind, std::string what, std::vector<const Op*> ops) {
    if (o_.loss_expected && LossEffect(kind)) {
      ++r_.loss_effects[kind];
      return;
    }
    std::sort(ops.begin(), ops.end(), [](const Op* a, const Op* b) { return a->t0 < b->t0; });
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    Anomaly a{kind, std::move(what), {}};
    // Requests that failed with a definite answer changed nothing: they are left out, unless
    // the slice would be empty without them.
    size_t shown = 0;
    for (const Op* op : ops) {
      if (ops.size() > 1 && op->answered() && !op->ok() && op->code != "mixed" && !Doubtful(op->code)) continue;
      if (++shown > 60) {
        a.slice.push_back("  …");
        break;
      }
      a.slice.push_back(Line(*op));
    }
    for (const Fault& f : h_.faults) {
      if (!ops.empty() && f.t0 <= ops.back()->t0 && f.t1 >= ops.front()->t0) {
        a.slice.push_back(fmt::format("  fault {} from +{:.3f}s to +{:.3f}s", f.name, (f.t0 - origin_) / 1e6,
                                      (f.t1 - origin_) / 1e6));
      }
    }
    r_.anomalies.push_back(std::move(a));
  }
  void AddJob(const std::string& kind, const std::string& what, const Trace& t) { Add(kind, what, t.ops); }

  DeliveryRec* DeliveryOf(const std::string& receipt) {
    auto it = by_receipt_.find(receipt);
    return it == by_receipt_.end() ? nullptr : &deliveries_[it->second];
  }

  // Builds one trace per job from every operation that names it.
  void Index() {
    for (const Op& op : h_.ops) {
      ++r_.ops;
      ++r_.by_op[op.op];
      if (op.answered()) ++r_.answered;
      else ++r_.in_doubt;
      if (op.answered() && !op.ok() && op.code != "mixed") ++r_.errors;
      const std::string& q = op.queue;
      if (op.op == "enqueue") {
        const Json& jobs = op.args.value("jobs", Json::array());
        for (const Json& j : jobs) {
          if (!j.contains("key")) continue;
          keyed_ops_[{q, j["key"].get<std::string>()}].push_back(&op);
          // A replace in doubt may have moved the due time of whichever job held the key.
          if (!op.ok() && Doubtful(op.code) && j.value("rep", false)) keyed_due_doubt_.insert({q, j["key"]});
        }
        if (!op.ok()) {
          if (Doubtful(op.code)) {
            in_doubt_jobs_[q] += static_cast<int64_t>(jobs.size());
            enqueues_in_doubt_[q].push_back(&op);
          }
          continue;
        }
        const Json& res = op.result["jobs"];
        for (size_t i = 0; i < res.size(); ++i) {
          Trace& t = T(res[i]["id"], q);
          t.ops.push_back(&op);
          t.dues.insert(res[i]["due"].get<int64_t>());
          // What made the job, or replaced it, gave it its payload; a dedupe answered its id gave none.
          const bool gave = !res[i]["dup"].get<bool>() || res[i].value("rep", false);
          if (gave && i < jobs.size() && jobs[i].contains("p")) t.payloads.insert(jobs[i]["p"].get<std::string>());
          if (!res[i]["dup"].get<bool>() && !t.created) {
            t.created = &op;
            if (i < jobs.size()) {
              t.key = jobs[i].value("key", "");
              t.max_asked = jobs[i].value("max", int64_t{0});
            }
          }
        }
      } else if (op.op == "reserve" && !op.ok()) {
        if (Doubtful(op.code)) reserves_in_doubt_[q].push_back(&op);
      } else if (op.op == "reserve" && op.ok()) {
        for (const Json& d : op.result["d"]) {
          DeliveryRec rec;
          rec.reserve = &op;
          rec.id = d["id"];
          rec.receipt = d["rc"];
          rec.queue = q;
          rec.attempt = d["att"];
          rec.max = d["max"];
          rec.due = d["due"];
          rec.deadline = d["ld"];
          rec.lease_ms = op.args["lease"];
          rec.lease_end = rec.deadline;
          if (d.contains("p")) rec.payload = d["p"].get<std::string>();
          by_receipt_[rec.receipt] = deliveries_.size();
          Trace& t = T(rec.id, q);
          t.ops.push_back(&op);
          if (t.key.empty()) t.key = d.value("key", "");
          t.deliveries.push_back(deliveries_.size());
          deliveries_.push_back(std::move(rec));
        }
      } else if (op.op == "ack" || op.op == "nack" || op.op == "touch") {
        std::vector<std::string> receipts;
        if (op.op == "ack") {
          receipts = op.args["rc"].get<std::vector<std::string>>();
        } else {
          receipts = {op.args["rc"].get<std::string>()};
        }
        for (size_t i = 0; i < receipts.size(); ++i) {
          std::string code = op.code;
          if (op.op == "ack" && op.answered() && op.result.contains("codes") && i < op.result["codes"].size()) {
            code = op.result["codes"][i];
          }
          Trace& t = T(IdOf(receipts[i]), q);
          t.ops.push_back(&op);
          DeliveryRec* d = DeliveryOf(receipts[i]);
          if (op.op == "ack" && (code == "ok" || Doubtful(code))) t.ack_results.insert(op.args.value("res", ""));
          if (code == "ok") {
            if (op.args.value("why", "") == "forged") {
              Add("stale", fmt::format("a forged receipt {} was accepted by {}", receipts[i], op.op), {&op});
            }
            if (op.op == "ack") {
              t.removed_ok_t1 = std::min(t.removed_ok_t1, op.t1);
              if (d) d->acked = true;
            } else if (op.op == "nack") {
              if (d) d->nacked = true;
              if (op.result["state"] == "dead") t.may_be_dead = true;
              else t.dues.insert(op.result["due"].get<int64_t>());
            } else if (d) {
              d->lease_end = op.result["ld"].get<int64_t>();  // a touch may shorten the lease too
            }
          } else if (Doubtful(code)) {
            if (op.op == "ack") t.removed_in_doubt = true;
            if (op.op == "nack") {
              t.may_be_dead = true;
              t.due_unknown = true;
            }
            if (d) d->unsure = true;
          }
        }
      } else if (op.op == "cancel" || op.op == "reschedule" || op.op == "get" || op.op == "wait") {
        const bool by_key = op.args.contains("key");
        if (by_key) {
          keyed_ops_[{q, op.args["key"].get<std::string>()}].push_back(&op);
          if (op.op == "cancel") key_cancels_[{q, op.args["key"].get<std::string>()}].push_back(&op);
          if (op.op == "reschedule" && Doubtful(op.code)) keyed_due_doubt_.insert({q, op.args["key"]});
        }
        std::string id = by_key ? (op.ok() && op.result.contains("id") ? op.result["id"].get<std::string>() : "")
                                : op.args["id"].get<std::string>();
        if (id.empty()) continue;
        Trace& t = T(id, q);
        t.ops.push_back(&op);
        if (op.op == "cancel") {
          t.cancelled_ok = t.cancelled_ok || op.ok();
          if (op.ok()) t.removed_ok_t1 = std::min(t.removed_ok_t1, op.t1);
          else if (Doubtful(op.code)) t.removed_in_doubt = true;
        } else if (op.op == "reschedule") {
          if (op.ok()) t.dues.insert(op.result["due"].get<int64_t>());
          else if (Doubtful(op.code)) t.due_unknown = true;
        } else if (op.op == "wait" && (t.waits.push_back(&op), op.ok()) && op.result["state"] == "dead") {
          t.may_be_dead = true;
        } else if (op.ok() && op.result["state"] == "dead") {
          t.may_be_dead = true;
        }
      } else if (op.op == "dead_list" && op.ok()) {
        for (const Json& j : op.result["jobs"]) {
          Trace& t = T(j["id"], q);
          t.ops.push_back(&op);
          t.may_be_dead = true;
        }
      } else if (op.op == "replay") {
        replays_[q].push_back(&op);
        for (const Json& id : op.args["ids"]) T(id, q).ops.push_back(&op);
      } else if (op.op == "purge") {
        purges_[q].push_back(&op);
      } else if (op.op == "pause" || op.op == "resume") {
        pauses_[q].push_back(&op);
      }
    }
    // An operation by key names a job only by key: it joins the slice of every job with that
    // key, and one in doubt leaves their due times open.
    for (auto& [id, t] : traces_) {
      if (t.key.empty()) continue;
      auto it = keyed_ops_.find({t.queue, t.key});
      if (it != keyed_ops_.end()) t.ops.insert(t.ops.end(), it->second.begin(), it->second.end());
      if (keyed_due_doubt_.contains({t.queue, t.key})) t.due_unknown = true;
      if (it == keyed_ops_.end()) continue;
      // An enqueue of its key in doubt may have made it, or replaced it, with its payload.
      for (const Op* op : it->second) {
        if (op->op != "enqueue" || op->ok() || !Doubtful(op->code)) continue;
        for (const Json& j : op->args["jobs"]) {
          if (j.value("key", "") == t.key && j.contains("p")) t.payloads.insert(j["p"]);
        }
      }
    }
  }

  void CheckAnswers() {
    std::set<int> killed(o_.killed_clients.begin(), o_.killed_clients.end());
    for (const Op& op : h_.ops) {
      if (!op.answered()) {
        if (!killed.contains(op.client)) Add("answered", "a request was never answered", {&op});
        continue;
      }
      const int64_t took = op.t1 - op.t0;
      const bool fault = InFault(op.t0, op.t1);
      if (op.op == "must_fail" && op.ok()) {
        // In a mode that loses writes by design, a delete lost in the fault can make its probe
        // succeed: a loss effect there, an anomaly everywhere else.
        Add(o_.loss_expected && fault ? "lost" : "must_fail",
            "a request that must fail succeeded: " + op.args.value("kind", ""), {&op});
      }
      if (op.code == "internal") Add("answered", "an internal error: " + op.message, {&op});
      if (fault) continue;
      if (op.code == "no_answer") {
        Add("answered", "no answer within the client's deadline: " + op.message, {&op});
        continue;
      }
      if (op.code == "unavailable" || op.code == "io_error") {
        Add("answered", "the store was unavailable outside any fault: " + op.message, {&op});
      }
      const bool long_poll = op.op == "reserve" || op.op == "wait";
      const int64_t limit = long_poll ? op.args.value("wait", int64_t{0}) * 1000 + 1'000'000 : 5'000'000;
      if (took > limit) {
        Add("answered", fmt::format("answered after {:.0f} ms; the limit is {:.0f} ms", took / 1e3, limit / 1e3),
            {&op});
      }
    }
  }

  bool DueExplained(const Trace& t, const DeliveryRec& d) const {
    if (t.due_unknown || t.dues.contains(d.due)) return true;
    // A job no answer created: an enqueue in doubt (its answer was lost) sent before this
    // delivery created it, with a due time no answer shows (later nacks may add others).
    if (!t.created) {
      auto it = enqueues_in_doubt_.find(t.queue);
      if (it != enqueues_in_doubt_.end() && it->second.front()->t0 <= d.reserve->t1) return true;
    }
    // A replay makes a job due at the store's "now" during the replay request.
    auto it = replays_.find(t.queue);
    if (it == replays_.end()) return false;
    for (const Op* op : it->second) {
      const int64_t end = EffectEnd(*op);
      if (o_.clock_steps || (d.due * 1000 >= op->t0 - 50'000 && (end == kNever || d.due * 1000 <= end + 50'000))) {
        return true;
      }
    }
    return false;
  }

  // A wall-clock step near [t0, t1] (the store's times of that span are not comparable).
  bool NearClockStep(int64_t t0, int64_t t1) const {
    for (const Fault& f : h_.faults) {
      if (f.name.rfind("clock", 0) == 0 && t0 <= f.t1 + o_.fault_grace_us && t1 + 5'000'000 >= f.t0) return true;
    }
    return false;
  }

  // Whether a reserve on the queue that overlaps [from, to] got no definite answer.
  bool ReserveInDoubt(const std::string& queue, int64_t from, int64_t to) const {
    auto it = reserves_in_doubt_.find(queue);
    if (it == reserves_in_doubt_.end()) return false;
    for (const Op* op : it->second) {
      if (op->t0 <= to && EffectEnd(*op) >= from) return true;
    }
    return false;
  }

  // Whether a power cut may have come within [from, to] (µs): the power goes at a moment inside
  // its fault's [t0, t1] (after the disk turned slow, when a write was answered), so any overlap
  // counts. (Found: a lease answered during the slow disk, before the cut, was counted as held.)
  bool PowerCutBetween(int64_t from, int64_t to) const {
    for (const Fault& f : h_.faults) {
      if (f.name == "power-cut" && f.t0 <= to && f.t1 >= from) return true;
    }
    return false;
  }

  // Whether a replay naming the job (or all) or a replace of its key, ok or in doubt, overlaps
  // [from, to]: its attempts start again.
  bool Restarted(const Trace& t, int64_t from, int64_t to) const {
    auto overlaps = [&](const Op* op) { return op->t0 <= to && EffectEnd(*op) >= from; };
    auto replays = replays_.find(t.queue);
    if (replays != replays_.end()) {
      for (const Op* op : replays->second) {
        if (!(op->ok() || Doubtful(op->code)) || !overlaps(op)) continue;
        const Json& ids = op->args.value("ids", Json::array());
        if (ids.empty() || std::find(ids.begin(), ids.end(), Json(t.id)) != ids.end()) return true;
      }
    }
    if (t.key.empty()) return false;
    auto keyed = keyed_ops_.find({t.queue, t.key});
    if (keyed == keyed_ops_.end()) return false;
    for (const Op* op : keyed->second) {
      if (op->op != "enqueue" || !(op->ok() || Doubtful(op->code)) || !overlaps(op)) continue;
      for (const Json& j : op->args.value("jobs", Json::array())) {
        if (j.value("key", "") == t.key && j.value("rep", false)) return true;
      }
    }
    return false;
  }

  // The latest time (ms) the store's clock may have shown by checker time t_us because of a
  // forward step: during "clock+1h" it ran an hour ahead, and a job that came due then stays
  // due after the step back. The moment of the step back is only known to lie before the
  // fault's end, so the whole window counts.
  int64_t ForwardStepReach(int64_t t_us) const {
    int64_t reach = 0;
    for (const Fault& f : h_.faults) {
      if (f.name == "clock+1h" && f.t0 <= t_us) reach = std::max(reach, std::min(f.t1, t_us) / 1000 + 3'600'000);
    }
    return reach;
  }

  void CheckDeliveries() {
    // When the store's clock steps back, a job that came due before the step stays due. What
    // the store's clock had reached before each delivery: the latest delivery time the clients
    // had seen by then.
    std::vector<int64_t> reached(deliveries_.size(), 0);
    if (o_.clock_steps) {
      std::vector<size_t> order(deliveries_.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(),
                [&](size_t a, size_t b) { return deliveries_[a].reserve->t1 < deliveries_[b].reserve->t1; });
      int64_t most = 0;
      for (size_t i : order) {
        reached[i] = std::max(most, ForwardStepReach(deliveries_[i].reserve->t1));
        most = std::max(most, deliveries_[i].at());
      }
    }
    for (auto& [id, t] : traces_) {
      // In the store's order, or (when its clock steps) in the order the clients received them.
      std::sort(t.deliveries.begin(), t.deliveries.end(), [&](size_t a, size_t b) {
        return o_.clock_steps ? deliveries_[a].reserve->t1 < deliveries_[b].reserve->t1
                              : deliveries_[a].at() < deliveries_[b].at();
      });
      std::set<int64_t> came_due;  // a job that came due stays due: its redeliveries are not early
      for (size_t k = 0; k < t.deliveries.size(); ++k) {
        const DeliveryRec& d = deliveries_[t.deliveries[k]];
        if (came_due.insert(d.due).second && d.at() < d.due && reached[t.deliveries[k]] < d.due) {
          AddJob("early",
                 fmt::format("job {} was handed out at {} ms, {} ms before it was due at {}", id, d.at(),
                             d.due - d.at(), d.due),
                 t);
        }
        if (d.attempt > d.max) {
          AddJob("attempts", fmt::format("job {} was delivered for attempt {} of {}", id, d.attempt, d.max), t);
        }
        if (!DueExplained(t, d)) {
          AddJob("due", fmt::format("job {} was delivered with due time {}, which no answer gave it", id, d.due), t);
        }
        if (k == 0) continue;
        const DeliveryRec& prev = deliveries_[t.deliveries[k - 1]];
        // Attempts go up by one. A reserve whose answer was lost (a server killed mid-request)
        // may have made a delivery no one saw, so attempts may skip then; a replay or a replace
        // starts them again.
        const int64_t from = prev.reserve->t0, to = d.reserve->t1;
        const bool hidden = ReserveInDoubt(t.queue, from, to);
        const bool reset = Restarted(t, from, to);
        // Where leases are answered before they are synced, a power cut can take a lease back
        // with the attempt it counted: the next delivery counts that attempt again.
        const bool lease_lost = o_.unsynced_leases && !prev.nacked && !prev.acked &&
                                PowerCutBetween(prev.reserve->t0, d.reserve->t1) && d.at() < prev.lease_end;
        const bool fine = d.attempt == prev.attempt + 1 || d.attempt == 1 ||
                          (hidden && (d.attempt > prev.attempt || reset)) || (lease_lost && d.attempt == prev.attempt);
        if (!fine) {
          AddJob("attempts", fmt::format("job {} went from attempt {} to attempt {}", id, prev.attempt, d.attempt), t);
        }
        if (prev.nacked || prev.unsure || prev.acked) continue;  // acked: see CheckJobs
        if (o_.clock_steps && NearClockStep(prev.reserve->t0, d.reserve->t1)) continue;
        if (d.at() < prev.lease_end && o_.unsynced_leases && PowerCutBetween(prev.reserve->t0, d.reserve->t1)) {
          ++r_.loss_effects["lease lost to a power cut"];
          continue;
        }
        if (d.at() < prev.lease_end) {
          AddJob("lease",
                 fmt::format("job {} was handed out again at {} while the lease of attempt {} lasted until {}", id,
                             d.at(), prev.attempt, prev.lease_end),
                 t);
        }
      }
    }
    // A receipt acts only while its delivery is the job's newest one.
    for (const Op& op : h_.ops) {
      if (op.op != "ack" && op.op != "nack" && op.op != "touch") continue;
      std::vector<std::string> receipts =
          op.op == "ack" ? op.args["rc"].get<std::vector<std::string>>() : std::vector<std::string>{op.args["rc"]};
      for (size_t i = 0; i < receipts.size(); ++i) {
        std::string code = op.code;
        if (op.op == "ack" && op.answered() && op.result.contains("codes") && i < op.result["codes"].size()) {
          code = op.result["codes"][i];
        }
        if (code != "ok") continue;
        const DeliveryRec* d = DeliveryOf(receipts[i]);
        if (!d) continue;
        const Trace& t = traces_[d->id];
        // The deliveries after this one, in the order sorted above.
        auto self =
            std::find_if(t.deliveries.begin(), t.deliveries.end(), [&](size_t k) { return &deliveries_[k] == d; });
        for (auto it = self == t.deliveries.end() ? self : std::next(self); it != t.deliveries.end(); ++it) {
          const DeliveryRec& later = deliveries_[*it];
          if (later.reserve->answered() && later.reserve->t1 < op.t0) {
            AddJob("stale",
                   fmt::format("a {} with the receipt of attempt {} of job {} succeeded after attempt {} "
                               "had been handed out",
                               op.op, d->attempt, d->id, later.attempt),
                   t);
            break;
          }
        }
      }
    }
  }

  // An ack, a cancel by id, or a dead job's purge. Cancels by key are matched apart (KeyCancelsExplain).
  bool RemovalExplained(const Trace& t) const {
    if (t.removed_ok_t1 != kNever || t.removed_in_doubt) return true;
    bool dead = t.may_be_dead;
    for (size_t k : t.deliveries) dead = dead || deliveries_[k].attempt >= deliveries_[k].max;
    // Deliveries no one saw (reserves whose answer was lost) may have used up the attempts; then
    // the lease ran out on the last one and the job went dead (found by the Redis failover mode:
    // max_attempts 1, reserves answered 503 when the replica lagged, then a purge).
    if (!dead) {
      int64_t seen = 0, max = t.max_asked > 0 ? t.max_asked : 1000;
      for (size_t k : t.deliveries) {
        seen = std::max(seen, deliveries_[k].attempt);
        max = deliveries_[k].max;
      }
      int64_t unseen = 0;
      auto it = reserves_in_doubt_.find(t.queue);
      if (it != reserves_in_doubt_.end()) {
        for (const Op* op : it->second) unseen += op->t0 >= t.created->t0 ? 1 : 0;
      }
      dead = seen + unseen >= max;
    }
    if (!dead) return false;
    auto it = purges_.find(t.queue);
    if (it == purges_.end()) return false;
    for (const Op* op : it->second) {
      if ((op->ok() || Doubtful(op->code)) && op->t0 >= t.created->t0) return true;
    }
    return false;
  }

  // A cancel by key removes one job: the live one with that key when it takes effect. It may take
  // effect at any moment between its send and its answer, so it explains a job whose enqueue was
  // sent before the cancel was answered, even one sent after the cancel was (found in CI: a cancel
  // of key k slowed by a terminated PostgreSQL connection cancelled the job an enqueue sent 12 ms
  // after it had created). Each such cancel explains at most one gone job. The jobs a cancel may
  // explain are those enqueued before it ended; taking the cancels by end time, each the earliest
  // job left, pairs as many as any pairing can.
  std::set<const Trace*> KeyCancelsExplain(const std::vector<const Trace*>& unexplained) const {
    std::map<std::pair<std::string, std::string>, std::vector<const Trace*>> by_key;
    for (const Trace* t : unexplained) {
      if (!t->key.empty()) by_key[{t->queue, t->key}].push_back(t);
    }
    std::set<const Trace*> explained;
    for (auto& [qk, jobs] : by_key) {
      auto it = key_cancels_.find(qk);
      if (it == key_cancels_.end()) continue;
      std::vector<int64_t> ends;
      for (const Op* op : it->second) {
        if (op->ok() || Doubtful(op->code)) ends.push_back(op->answered() ? op->t1 : kNever);
      }
      std::sort(ends.begin(), ends.end());
      std::sort(jobs.begin(), jobs.end(),
                [](const Trace* a, const Trace* b) { return a->created->t0 < b->created->t0; });
      size_t next = 0;
      for (int64_t end : ends) {
        if (next < jobs.size() && jobs[next]->created->t0 <= end) explained.insert(jobs[next++]);
      }
    }
    return explained;
  }

  // A completed job: its queue keeps completed jobs, an ack of it went well (or is in doubt), and
  // it shows that ack's result.
  void CheckCompleted(const Trace& t, const FinalJob& f) {
    if (StartConfig::KeepCompletedMs(t.queue) == 0 && !Waited(t)) {  // an ack keeps a waited job
      AddJob("result", fmt::format("job {} is completed in queue {}, which keeps no completed jobs", t.id, t.queue), t);
    } else if (t.ack_results.empty()) {
      AddJob("result", fmt::format("job {} is completed, but no ack of it answered ok", t.id), t);
    } else if (!t.ack_results.contains(f.result)) {
      AddJob("result",
             fmt::format("job {} is completed with the result {}, which no ack of it that answered ok carried", t.id,
                         f.result.substr(0, 80)),
             t);
    }
  }

  // A wait answers a state that is not final only once its wait_ms has passed; completed with
  // the result of an ack of the job that answered ok or is in doubt, begun before the answer;
  // cancelled only after a cancel of the job (by id or by its key) was sent.
  void CheckWaits() {
    for (const auto& [id, t] : traces_) {
      for (const Op* w : t.waits) {
        if (!w->ok()) continue;
        const std::string state = w->result["state"];
        const int64_t wait_us = w->args.value("wait", int64_t{0}) * 1000;
        if (state != "completed" && state != "dead" && state != "cancelled") {
          // The server's timer starts after the request was sent: a wait that ran its course took
          // at least wait_ms on the checker's clock (1 ms of slack for the two clocks' rounding).
          if (w->t1 - w->t0 < wait_us - 1'000) {
            AddJob("wait",
                   fmt::format("a wait of {} ms answered job {} {} after {:.0f} ms, before the wait ended",
                               wait_us / 1000, id, state, (w->t1 - w->t0) / 1e3),
                   t);
          }
        } else if (state == "completed" && !AckedBefore(t, w->t1, w->result.value("result", std::string()))) {
          AddJob("wait",
                 fmt::format("a wait answered job {} completed, but no ack of it with that result was sent", id), t);
        } else if (state == "cancelled" && !CancelledBefore(t, w->t1)) {
          // Where writes are lost by design, a job a lost write took away is answered gone: cancelled.
          AddJob(o_.loss_expected ? "lost" : "wait",
                 fmt::format("a wait answered job {} cancelled, but no cancel of it was sent", id), t);
        }
      }
    }
  }

  // Whether a wait for the job's outcome was sent, by id or by its key (answered or not: a server
  // killed while it waited leaves the wait noted in a shared store until its end).
  bool Waited(const Trace& t) const {
    if (!t.waits.empty()) return true;
    auto keyed = keyed_ops_.find({t.queue, t.key});
    return !t.key.empty() && keyed != keyed_ops_.end() &&
           std::any_of(keyed->second.begin(), keyed->second.end(), [](const Op* op) { return op->op == "wait"; });
  }

  bool AckedBefore(const Trace& t, int64_t before, const std::string& result) const {
    if (!t.ack_results.contains(result)) return false;
    return std::any_of(t.ops.begin(), t.ops.end(), [&](const Op* op) { return op->op == "ack" && op->t0 < before; }) ||
           t.removed_in_doubt;
  }

  bool CancelledBefore(const Trace& t, int64_t before) const {
    auto sent = [&](const Op* op) { return op->op == "cancel" && op->t0 < before && (op->ok() || Doubtful(op->code)); };
    if (std::any_of(t.ops.begin(), t.ops.end(), sent)) return true;
    auto keyed = key_cancels_.find({t.queue, t.key});
    return !t.key.empty() && keyed != key_cancels_.end() &&
           std::any_of(keyed->second.begin(), keyed->second.end(), sent);
  }

  void CheckJobs() {
    std::vector<const Trace*> gone;
    for (const auto& [id, t] : traces_) {
      auto f = f_.jobs.find(id);
      const bool present = f != f_.jobs.end() && f->second.found;
      const bool completed = present && f->second.state == "completed";
      if (completed) CheckCompleted(t, f->second);
      if (t.removed_ok_t1 != kNever) {
        bool again = present && (!completed || t.cancelled_ok);  // an ack keeps it completed; a cancel does not
        for (size_t k : t.deliveries) again = again || deliveries_[k].reserve->t0 > t.removed_ok_t1;
        if (again) {
          ++r_.resurrected;
          AddJob("resurrected",
                 fmt::format("job {} was {} after an ack or cancel of it answered ok", id,
                             present ? "still there at the end" : "delivered again"),
                 t);
        }
      }
      if (t.created && !present && !RemovalExplained(t)) gone.push_back(&t);
    }
    const std::set<const Trace*> by_key = KeyCancelsExplain(gone);
    for (const Trace* gone_job : gone) {
      if (by_key.contains(gone_job)) continue;
      const Trace& t = *gone_job;
      ++r_.lost;
      // How long before the next fault its enqueue was acknowledged: a loss bounded by a sync
      // interval shows here.
      // The fault that lost it is the first to end after the enqueue was answered (one answered
      // during a fault, before its power cut, counts as 0 ms before it).
      for (const Fault& f : h_.faults) {
        if (t.created->answered() && f.t1 >= t.created->t1) {
          r_.lost_window_ms = std::max(r_.lost_window_ms, std::max<int64_t>(0, f.t0 - t.created->t1) / 1000.0);
          break;
        }
      }
      AddJob("lost",
             fmt::format("job {} was enqueued (acknowledged) and is gone, with no ack, cancel or purge "
                         "that explains it",
                         t.id),
             t);
    }
    // A nack of the last attempt makes the job dead.
    for (const Op& op : h_.ops) {
      if (op.op != "nack" || !op.ok()) continue;
      const DeliveryRec* d = DeliveryOf(op.args["rc"]);
      if (d && d->attempt >= d->max && op.result["state"] != "dead") {
        AddJob("attempts",
               fmt::format("the nack of attempt {} of {} of job {} scheduled it again instead of making it dead",
                           d->attempt, d->max, d->id),
               traces_[d->id]);
      }
    }
  }

  void CheckKeys() {
    std::map<std::pair<std::string, std::string>, std::vector<const Trace*>> live;
    for (const auto& [id, t] : traces_) {
      auto f = f_.jobs.find(id);
      if (f == f_.jobs.end() || !f->second.found || f->second.key.empty()) continue;
      if (f->second.state == "dead" || f->second.state == "completed") continue;  // neither holds its key
      live[{t.queue, f->second.key}].push_back(&t);
    }
    for (const auto& [qk, jobs] : live) {
      if (jobs.size() < 2) continue;
      std::vector<const Op*> ops;
      for (const Trace* t : jobs) ops.insert(ops.end(), t->ops.begin(), t->ops.end());
      Add("keys", fmt::format("{} live jobs of queue {} share the key {}", jobs.size(), qk.first, qk.second), ops);
    }
  }

  void CheckCounts() {
    if (!f_.settled) return;
    std::map<std::string, QueueCounts> recount;
    for (const auto& [id, t] : traces_) {
      auto f = f_.jobs.find(id);
      if (f == f_.jobs.end() || !f->second.found) continue;
      QueueCounts& c = recount[t.queue];
      const std::string& s = f->second.state;
      (s == "scheduled"   ? c.scheduled
       : s == "ready"     ? c.ready
       : s == "reserved"  ? c.reserved
       : s == "completed" ? c.completed
                          : c.dead) += 1;
    }
    for (const auto& [q, stats] : f_.stats) {
      const QueueCounts& mine = recount[q];
      auto slack = in_doubt_jobs_.count(q) ? in_doubt_jobs_.at(q) : 0;
      const int64_t extra = (stats.scheduled - mine.scheduled) + (stats.ready - mine.ready) +
                            (stats.reserved - mine.reserved) + (stats.dead - mine.dead) +
                            (stats.completed - mine.completed);
      const bool each_at_least = stats.scheduled >= mine.scheduled && stats.ready >= mine.ready &&
                                 stats.reserved >= mine.reserved && stats.dead >= mine.dead &&
                                 stats.completed >= mine.completed;
      if (!each_at_least || extra > slack) {
        Add("counts",
            fmt::format("queue {}: stats say scheduled {} ready {} reserved {} dead {} completed {}; a recount of "
                        "the jobs finds {} {} {} {} {} (and up to {} unknown from enqueues in doubt)",
                        q, stats.scheduled, stats.ready, stats.reserved, stats.dead, stats.completed, mine.scheduled,
                        mine.ready, mine.reserved, mine.dead, mine.completed, slack),
            {});
      }
      auto m = f_.metrics.find(q);
      if (m == f_.metrics.end() || !(m->second == stats)) {
        Add("counts", fmt::format("queue {}: /metrics does not match the stats", q), {});
      }
    }
  }

  // A delivery carries the payload of an enqueue of its job (the one that made it, or a replace
  // by its key): not another job's, nor one cut short.
  void CheckPayloads() {
    for (const DeliveryRec& d : deliveries_) {
      const Trace& t = traces_.at(d.id);
      if (t.payloads.empty() || !d.payload || t.payloads.contains(*d.payload)) continue;
      AddJob("payload",
             fmt::format("job {} was delivered with the payload {}, which no enqueue of it gave ({} did)", d.id,
                         Json(*d.payload).dump(), Json(t.payloads).dump()),
             t);
    }
  }

  // A paused queue hands out nothing: a reserve sent after a pause of its queue answered ok, and
  // answered before the next resume of it was sent, delivers no job.
  void CheckPauses() {
    std::set<const Op*> reported;
    for (const DeliveryRec& d : deliveries_) {
      auto it = pauses_.find(d.queue);
      if (it == pauses_.end() || reported.contains(d.reserve)) continue;
      const std::vector<const Op*>& ops = it->second;  // in send order
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i]->op != "pause" || !ops[i]->ok() || d.reserve->t0 <= ops[i]->t1) continue;
        // A resume sent before it that was not answered (a stopped server) may take effect after it.
        if (std::any_of(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(i),
                        [&](const Op* r) { return r->op == "resume" && EffectEnd(*r) >= ops[i]->t0; })) {
          continue;
        }
        size_t next = i + 1;
        while (next < ops.size() && ops[next]->op != "resume") ++next;
        if (next < ops.size() && d.reserve->t1 >= ops[next]->t0) continue;
        reported.insert(d.reserve);
        Add("pause",
            fmt::format("a reserve of {} sent after its pause was answered, and answered before a resume was sent, "
                        "delivered job {}",
                        d.queue, d.id),
            {ops[i], d.reserve});
        break;
      }
    }
  }

  bool PausedBetween(const std::string& queue, int64_t from_us, int64_t to_us) const {
    auto it = pauses_.find(queue);
    if (it == pauses_.end()) return false;
    bool paused = false;
    int64_t since = 0;
    for (const Op* op : it->second) {  // in send order
      if (op->op == "pause") {
        if (!paused) since = op->t0;
        paused = true;
      } else if (paused) {
        if (since <= to_us && op->t1 >= from_us) return true;
        paused = false;
      }
    }
    return paused && since <= to_us;
  }

  // Jobs that a poll was already waiting for when they came due: how late they were handed out.
  // The admin's schedule (worker.cc ScheduleStep: put, replace, pause, resume, delete and its
  // queue's max_delay_ms changed while it runs; its runs taken by "sched_reserve"). Each run is
  // due at the occurrence its key names and is delivered at or after it; a run has one first
  // delivery; and no run of a schedule deleted or paused comes due (more than a second) after
  // the delete or pause was answered, before a later put or resume was sent. (A run made late, a
  // missed one or one a stopped server made when it woke, is due when it was made.)
  void CheckSchedules() {
    struct Change {
      const Op* op;
      bool stops;  // a delete or pause that answered ok
    };
    std::vector<Change> changes;
    std::vector<const Op*> takes;
    for (const Op& op : h_.ops) {
      if (op.op == "sched_reserve" && op.ok()) {
        takes.push_back(&op);
      } else if ((op.op == "schedule_delete" || op.op == "schedule_pause") && op.ok()) {
        changes.push_back({&op, true});
      } else if ((op.op == "schedule_put" || op.op == "schedule_resume") && (op.ok() || Doubtful(op.code))) {
        changes.push_back({&op, false});  // one in doubt may have started it again
      }
    }
    std::map<std::string, const Op*> first_delivery;
    for (const Op* take : takes) {
      const int64_t lease_ms = take->args.value("lease", int64_t{0});
      for (const Json& d : take->result["d"]) {
        const std::string key = d.value("key", "");
        const int64_t due = d.value("due", int64_t{0});
        const auto colon = key.rfind(':');
        const int64_t occurrence = colon == std::string::npos ? -1 : std::atoll(key.c_str() + colon + 1);
        // Due at its occurrence, or later when it was made late (a missed run, a server that was
        // stopped): never before it.
        if (occurrence < 0 || due < occurrence) {
          Add("schedule", fmt::format("run {} was due at {}, before its occurrence", key, due), {take});
        }
        if (!o_.clock_steps && d.value("ld", int64_t{0}) - lease_ms < due) {
          Add("schedule", fmt::format("run {} was delivered before it was due", key), {take});
        }
        if (d.value("att", 0) == 1) {
          auto [it, fresh] = first_delivery.emplace(key, take);
          // A store that answers a reserve before its lease is durable hands the job out again,
          // as a first delivery, after a power cut lost the lease (VerifyOptions::unsynced_leases).
          const bool lease_lost = !fresh && o_.unsynced_leases && InFault(it->second->t1, take->t0);
          if (!fresh && !lease_lost) {
            Add("schedule", fmt::format("run {} was delivered twice as a first delivery", key), {it->second, take});
          }
        }
        if (o_.clock_steps) continue;
        for (const Change& stop : changes) {
          if (!stop.stops || stop.op->t1 + 1'000'000 >= due * 1000) continue;
          const bool restarted = std::any_of(changes.begin(), changes.end(), [&](const Change& c) {
            return !c.stops && c.op->t0 >= stop.op->t0 && c.op->t0 <= due * 1000;
          });
          if (!restarted) {
            Add("schedule",
                fmt::format("run {} came due {:.0f} ms after the schedule's {} was answered, and was delivered", key,
                            (due * 1000 - stop.op->t1) / 1e3, stop.op->op),
                {stop.op, take});
            break;
          }
        }
      }
    }
  }

  void CheckLateness() {
    std::vector<double> lateness;
    std::vector<const DeliveryRec*> which;
    for (const auto& [id, t] : traces_) {
      std::set<int64_t> seen_due;
      for (size_t k : t.deliveries) {
        const DeliveryRec& d = deliveries_[k];
        if (!seen_due.insert(d.due).second) continue;  // a redelivery of the same due time
        if (d.reserve->args.value("wait", int64_t{0}) == 0 || d.reserve->t0 + 5'000 > d.due * 1000) continue;
        const int64_t handed_us = d.at() * 1000;
        if (InFault(d.due * 1000, handed_us) || PausedBetween(d.queue, d.due * 1000, handed_us)) continue;
        lateness.push_back(static_cast<double>(d.at() - d.due));
        which.push_back(&d);
      }
    }
    r_.lateness_samples = static_cast<int64_t>(lateness.size());
    if (lateness.empty()) return;
    std::vector<size_t> order(lateness.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lateness[a] < lateness[b]; });
    auto at = [&](double q) {
      return lateness[order[std::min(order.size() - 1, static_cast<size_t>(q * order.size()))]];
    };
    r_.lateness_p50_ms = at(0.5);
    r_.lateness_p99_ms = at(0.99);
    r_.lateness_max_ms = lateness[order.back()];
    if (!o_.clock_steps && r_.lateness_p99_ms > 1000) {
      const DeliveryRec& worst = *which[order.back()];
      AddJob("lateness",
             fmt::format("p99 lateness of jobs a poll was waiting for is {:.0f} ms (max {:.0f} ms, job {})",
                         r_.lateness_p99_ms, r_.lateness_max_ms, worst.id),
             traces_.at(worst.id));
    }
  }

  const History& h_;
  const FinalState& f_;
  const VerifyOptions& o_;
  int64_t origin_ = 0;
  Report r_;
  std::map<std::string, Trace> traces_;
  std::vector<DeliveryRec> deliveries_;
  std::map<std::string, size_t> by_receipt_;
  std::map<std::string, int64_t> in_doubt_jobs_;
  std::map<std::pair<std::string, std::string>, std::vector<const Op*>> keyed_ops_, key_cancels_;
  std::set<std::pair<std::string, std::string>> keyed_due_doubt_;
  std::map<std::string, std::vector<const Op*>> replays_, purges_, pauses_, reserves_in_doubt_, enqueues_in_doubt_;
};

}  // namespace

Report Verify(const History& history, const FinalState& final_state, const VerifyOptions& options) {
  return Verifier(history, final_state, options).Run();
}

}  // namespace delayq::check
