// The reserve of a queue with flow control (rate_per_s, burst, max_reserved, group_max_reserved)
// or with priorities and groups, on the PostgreSQL store: the rules are the ones every store
// shares (core/flow_control.h for the allowance, core/ready_order.h for the order), applied here
// in C++ inside one transaction that holds the queue's row, so two servers reserving from one
// such queue take turns and the limits hold across them.
//
// Ready order is kept lazily: delayq.group_turns holds the turn of each group that had ready jobs
// at the last reserve. A group with ready jobs and no row joins at the back, in the order its first
// job came due (which is when it would have joined on the embedded store: no reserve ran since);
// a group found without ready jobs leaves. A take makes the group's turn the newest.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/flow_control.h"
#include "core/ready_order.h"
#include "store/postgres/pg_common.h"
#include "store/postgres/postgres_queue.h"

namespace delayq::postgres {
namespace {

// A ready job a reserve may take: its place in ready order and its stored size.
struct Candidate {
  std::string id;
  std::string group;
  int priority = 0;
  int64_t due_ms = 0;
  int64_t bytes = 0;
};

constexpr const char* kSize =
    "octet_length(payload) + coalesce(octet_length(headers::text), 0) + coalesce(octet_length(key), 0) + "
    "octet_length(grp) + 64";

// The first `per_lane` ready jobs of each (group, priority) of the queue: every job a reserve of
// that many could take. The lanes are found by a loose scan of jobs_lanes (one probe per lane).
Result<std::vector<Candidate>> LaneHeads(Connection& c, const std::string& queue, int64_t now_ms, int64_t per_lane) {
  auto r = c.Exec(
      fmt::format("WITH RECURSIVE lanes AS ("
                  " (SELECT grp, priority FROM delayq.jobs WHERE queue = $1 AND state = 's' AND (grp <> '' OR "
                  "priority <> 0) ORDER BY grp, priority LIMIT 1)"
                  " UNION ALL SELECT x.grp, x.priority FROM lanes l, LATERAL (SELECT grp, priority FROM delayq.jobs"
                  " WHERE queue = $1 AND state = 's' AND (grp <> '' OR priority <> 0) AND (grp, priority) > "
                  "(l.grp, l.priority) ORDER BY grp, priority LIMIT 1) x) "
                  "SELECT j.id, j.grp, j.priority, j.due_at_ms, j.size FROM lanes l, LATERAL (SELECT id, grp, "
                  "priority, due_at_ms, {} AS size FROM delayq.jobs WHERE queue = $1 AND state = 's' AND "
                  "(grp <> '' OR priority <> 0) AND grp = l.grp AND priority = l.priority AND due_at_ms <= $2 "
                  "ORDER BY due_at_ms, id LIMIT $3) j "
                  "UNION ALL (SELECT id, grp, priority, due_at_ms, {} FROM delayq.jobs WHERE queue = $1 AND "
                  "state = 's' AND grp = '' AND priority = 0 AND due_at_ms <= $2 ORDER BY due_at_ms, id LIMIT $3)",
                  kSize, kSize),
      {Param::Of(queue), Param::Of(now_ms), Param::Of(per_lane)});
  if (!r.ok()) return r.status();
  std::vector<Candidate> out;
  for (int i = 0; i < r->size(); ++i) {
    out.push_back({r->Str(i, 0), r->Str(i, 1), static_cast<int>(r->Int(i, 2)), r->Int(i, 3), r->Int(i, 4)});
  }
  return out;
}

// The ready jobs of a queue without priorities or groups, due first: `n` of them.
Result<std::vector<Candidate>> DueHeads(Connection& c, const std::string& queue, int64_t now_ms, int64_t n) {
  auto r = c.Exec(fmt::format("SELECT id, due_at_ms, {} FROM delayq.jobs WHERE queue = $1 AND state = 's' AND "
                              "due_at_ms <= $2 ORDER BY due_at_ms, id LIMIT $3",
                              kSize),
                  {Param::Of(queue), Param::Of(now_ms), Param::Of(n)});
  if (!r.ok()) return r.status();
  std::vector<Candidate> out;
  for (int i = 0; i < r->size(); ++i) out.push_back({r->Str(i, 0), "", 0, r->Int(i, 1), r->Int(i, 2)});
  return out;
}

// What the queue's row says, read under its lock.
struct QueueRow {
  QueueConfig config;
  bool paused = false, ordered = false;
  TokenBucket bucket;
  int64_t held_since_us = Clock::kNever;
  int64_t next_turn = 1;
  int64_t now_us = 0;
};

Result<std::optional<QueueRow>> LockQueue(Connection& c, const std::string& queue) {
  auto r =
      c.Exec(std::string("SELECT paused, ordered, tokens, tokens_at_us, held_since_us, next_turn, delayq.now_us(), ") +
                 kConfigColumns + " FROM delayq.queues WHERE name = $1 FOR NO KEY UPDATE",
             {Param::Of(queue)});
  if (!r.ok()) return r.status();
  if (r->empty()) return std::optional<QueueRow>{};
  QueueRow q;
  q.paused = r->Bool(0, 0);
  q.ordered = r->Bool(0, 1);
  if (!r->IsNull(0, 3)) q.bucket = {r->Double(0, 2), r->Int(0, 3)};
  if (!r->IsNull(0, 4)) q.held_since_us = r->Int(0, 4);
  q.next_turn = r->Int(0, 5);
  q.config = ConfigFromRow(*r, 0, 7);
  // The clock is read once the row is ours: the statement above read it before it waited for the
  // lock, and a lease counted from then would end early by that wait (found by delayq-check).
  auto now = c.Exec("SELECT delayq.now_us()");
  if (!now.ok()) return now.status();
  q.now_us = now->Int(0, 0);
  return std::optional(q);
}

struct GroupState {
  int64_t turn = 0;  // 0: no row (joins at the back)
  int64_t held_since_us = Clock::kNever;
  int64_t leased = 0;
  bool has_ready = false;
  bool full = false;  // held by group_max_reserved at the end of this reserve
};

Status SaveControlState(Connection& c, const std::string& queue, const TokenBucket& bucket, int64_t held_since_us,
                        int64_t next_turn, const std::map<std::string, GroupState, std::less<>>& groups) {
  DELAYQ_RETURN_IF_ERROR(
      c.Exec("UPDATE delayq.queues SET tokens = $2, tokens_at_us = $3, held_since_us = $4, next_turn = $5 "
             "WHERE name = $1",
             {Param::Of(queue), Param::Of(fmt::format("{}", bucket.tokens)),
              bucket.at_us == Clock::kNever ? Param::Null() : Param::Of(bucket.at_us),
              held_since_us == Clock::kNever ? Param::Null() : Param::Of(held_since_us), Param::Of(next_turn)})
          .status());
  std::vector<std::string> names, turns, holds;
  for (const auto& [name, g] : groups) {
    if (!g.has_ready || g.turn == 0) continue;
    names.push_back(name);
    turns.push_back(std::to_string(g.turn));
    holds.push_back(std::to_string(g.held_since_us == Clock::kNever ? -1 : g.held_since_us));
  }
  // Groups without ready jobs leave the turns; the others keep (or take) theirs.
  DELAYQ_RETURN_IF_ERROR(c.Exec("DELETE FROM delayq.group_turns WHERE queue = $1 AND NOT (grp = ANY ($2::text[]))",
                                {Param::Of(queue), Param::Of(TextArray(names))})
                             .status());
  if (names.empty()) return Status::Ok();
  return c
      .Exec(
          "INSERT INTO delayq.group_turns (queue, grp, turn, held_since_us) SELECT $1, g, t, nullif(h, -1) FROM "
          "unnest($2::text[], $3::bigint[], $4::bigint[]) AS u(g, t, h) ON CONFLICT (queue, grp) DO UPDATE SET "
          "turn = excluded.turn, held_since_us = excluded.held_since_us",
          {Param::Of(queue), Param::Of(TextArray(names)), Param::Of(TextArray(turns)), Param::Of(TextArray(holds))})
      .status();
}

// The candidates in ready order: groups join in turn order, then those without a turn (new
// ones, at the back) in the order their first ready job came due, each taking the next turn.
struct Lineup {
  ReadyOrder order;
  std::map<std::string, const Candidate*, std::less<>> by_id;
};
void LineUp(const std::vector<Candidate>& candidates, std::map<std::string, GroupState, std::less<>>& groups,
            int64_t& next_turn, Lineup& out) {
  std::map<std::string, std::pair<int64_t, std::string>, std::less<>> head;  // per group: its first (due, id)
  for (const auto& cand : candidates) {
    groups[cand.group].has_ready = true;
    auto [it, fresh] = head.emplace(cand.group, std::pair(cand.due_ms, cand.id));
    if (!fresh) it->second = std::min(it->second, std::pair(cand.due_ms, cand.id));
  }
  std::vector<std::pair<std::tuple<int64_t, int64_t, std::string>, std::string>> join;
  for (const auto& [name, h] : head) {
    const GroupState& g = groups[name];
    join.push_back({{g.turn == 0 ? INT64_MAX : g.turn, h.first, h.second}, name});
  }
  std::sort(join.begin(), join.end());
  for (const auto& [rank, name] : join) {
    if (groups[name].turn == 0) groups[name].turn = next_turn++;  // joins at the back
    for (const auto& cand : candidates) {
      if (cand.group != name) continue;
      auto id = Ulid::Parse(cand.id);
      if (!id) continue;
      out.order.Add(cand.group, cand.priority, ReadyKey{cand.due_ms, *id});
      out.by_id[cand.id] = &cand;
    }
  }
}

// Each group's leases (and so the queue's) and, with ready order, its turn and hold.
Result<int64_t> LoadGroups(Connection& c, const std::string& queue, const QueueRow& q,
                           std::map<std::string, GroupState, std::less<>>& groups) {
  int64_t reserved = 0;
  if (q.config.max_reserved > 0 || q.config.group_max_reserved > 0) {
    auto leases = c.Exec("SELECT grp, count(*) FROM delayq.jobs WHERE queue = $1 AND state = 'r' GROUP BY grp",
                         {Param::Of(queue)});
    if (!leases.ok()) return leases.status();
    for (int i = 0; i < leases->size(); ++i) {
      groups[leases->Str(i, 0)].leased = leases->Int(i, 1);
      reserved += leases->Int(i, 1);
    }
  }
  if (q.ordered) {
    auto turns = c.Exec("SELECT grp, turn, held_since_us FROM delayq.group_turns WHERE queue = $1", {Param::Of(queue)});
    if (!turns.ok()) return turns.status();
    for (int i = 0; i < turns->size(); ++i) {
      GroupState& g = groups[turns->Str(i, 0)];
      g.turn = turns->Int(i, 1);
      if (!turns->IsNull(i, 2)) g.held_since_us = turns->Int(i, 2);
    }
  }
  return reserved;
}

}  // namespace

// One transaction: the queue's row locked (FOR NO KEY UPDATE: enqueues, which only share its key,
// go on meanwhile), the allowance, the candidates, the picks by the shared
// rules, the leases, and the bucket, the turns and the limits' holds written back.
Result<std::vector<Delivery>> PostgresQueue::ReserveControlled(const std::string& queue, const ReserveRequest& request,
                                                               int64_t* look_again_ms) {
  auto c = Borrow();
  if (!c.ok()) return c.status();
  Connection& conn = **c;
  std::vector<std::string> picked;
  std::map<std::string, LatenessSplit> splits;  // of each first delivery: late, and held by a limit
  QueueRow q;
  auto rows = InTransaction(conn, [&]() -> Result<Rows> {
    auto locked = LockQueue(conn, queue);
    if (!locked.ok()) return locked.status();
    if (!*locked || (*locked)->paused) return Rows();
    q = **locked;
    const QueueConfig& config = q.config;
    const int64_t now_ms = q.now_us / 1000;
    std::map<std::string, GroupState, std::less<>> groups;
    auto reserved = LoadGroups(conn, queue, q, groups);
    if (!reserved.ok()) return reserved.status();
    const int64_t allowed = std::min<int64_t>(request.max, Allowance(config, q.bucket, q.now_us, *reserved));
    // One more than it may take: whether a limit held any back.
    auto candidates =
        q.ordered ? LaneHeads(conn, queue, now_ms, allowed + 1) : DueHeads(conn, queue, now_ms, allowed + 1);
    if (!candidates.ok()) return candidates.status();
    Lineup lineup;
    LineUp(*candidates, groups, q.next_turn, lineup);
    ReadyOrder& order = lineup.order;
    auto& by_id = lineup.by_id;
    ReadyOrderRules rules;
    rules.aging_ms = config.priority_aging_ms;
    const int64_t group_cap = config.group_max_reserved;
    if (group_cap > 0) {
      rules.full = [&](std::string_view g) {
        auto it = groups.find(g);
        return it != groups.end() && it->second.leased >= group_cap;
      };
    }
    int64_t bytes = 0;
    while (static_cast<int64_t>(picked.size()) < allowed) {
      auto pick = order.Peek(now_ms, rules);
      if (!pick) break;
      const Candidate* cand = by_id[pick->key.id.ToString()];
      if (!AnswerFits(bytes, cand->bytes, request.max_bytes, picked.empty())) break;
      bytes += cand->bytes;
      order.Take(*pick);
      GroupState& g = groups[pick->group];
      ++g.leased;
      g.turn = q.next_turn++;
      const int64_t held = std::min(q.held_since_us, g.held_since_us);
      splits[cand->id] = SplitLateness(cand->due_ms * 1000, held, q.now_us);
      picked.push_back(cand->id);
    }
    // Held back: ready jobs left that a limit (not max or max_bytes) kept from this reserve.
    const bool left = !order.empty();
    const bool queue_held = left && allowed < request.max && static_cast<int64_t>(picked.size()) == allowed;
    q.held_since_us = queue_held ? std::min(q.held_since_us, q.now_us) : Clock::kNever;
    for (auto& [name, g] : groups) {
      g.full = group_cap > 0 && g.has_ready && g.leased >= group_cap;
      g.held_since_us = g.full ? std::min(g.held_since_us, q.now_us) : Clock::kNever;
    }
    if (config.rate_per_s > 0) Take(config, q.bucket, static_cast<int64_t>(picked.size()));
    // Held by the rate (no whole token left): waiting reserves look again when the next comes.
    // Held by max_reserved alone: when a lease ends (an ack, a nack or the reaper announces it).
    if (queue_held && config.rate_per_s > 0 && q.bucket.tokens < 1) {
      *look_again_ms = NextTokenUs(config, q.bucket, q.now_us) / 1000 + 1;
    }
    DELAYQ_RETURN_IF_ERROR(SaveControlState(conn, queue, q.bucket, q.held_since_us, q.next_turn, groups));
    if (picked.empty()) return Rows();
    return conn.Exec(
        // The lease from the clock as the row is updated, not from now_ms (read before this
        // statement's snapshot): a reaper that ended the job's last lease may have committed after
        // now_ms, and the new lease must not start before the old one ended (_reserve says more).
        "UPDATE delayq.jobs j SET state = 'r', attempt = j.attempt + 1, token = delayq._token(), "
        "lease_deadline_ms = delayq.now_ms() + $3, waited = false FROM (SELECT id, waited FROM delayq.jobs WHERE "
        "queue = $1 AND id = ANY ($2::text[]) AND state = 's' AND due_at_ms <= $4 FOR UPDATE SKIP LOCKED) o WHERE "
        "j.queue = $1 AND j.id = o.id RETURNING j.id, "
        "j.payload, j.is_binary, j.headers, j.attempt, j.max_attempts, j.due_at_ms, j.key, j.lease_deadline_ms, "
        "j.priority, j.grp, o.waited, j.lease_deadline_ms - $3::bigint, j.token",
        {Param::Of(queue), Param::Of(TextArray(picked)), Param::Of(request.lease_ms.value_or(config.lease_ms)),
         Param::Of(now_ms)});
  });
  if (!rows.ok()) return rows.status();
  auto out = Deliveries(queue, *rows, splits);
  if (!out.ok()) return out.status();
  // In the order they were picked (RETURNING answers in any order).
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < picked.size(); ++i) rank[picked[i]] = i;
  std::sort(out->begin(), out->end(), [&](const Delivery& a, const Delivery& b) { return rank[a.id] < rank[b.id]; });
  return out;
}

}  // namespace delayq::postgres
