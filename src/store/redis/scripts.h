// The Lua scripts of the Redis store: every transition of a job is one script, run atomically
// by Redis with its own clock (TIME), so delayq hosts with skewed clocks cannot make jobs early.
//
// Keys of a queue (all under one hash tag, so one cluster slot; a sharded queue has one tag per
// shard, "{q#0}" ... "{q#N-1}"), passed to every script in this order:
//   1 dq:{q}:due       sorted set  id -> due ms            scheduled jobs
//   2 dq:{q}:jobs      hash        id -> body              the job record (src/core/record.h)
//                                  when it is over 4 KiB (kRecordInMetaMaxBytes), or of a job
//                                  made before format 4; it stays there until the job leaves
//   3 dq:{q}:meta      hash        id -> "4|len|2|state|due|base|attempt|max|delivery|sid|
//                                  key_indexed|key" then the job record: a job's one entry
//                                  (versioned: redis_meta.h; without the record, "2|..." or
//                                  "3|...", when it is in dq:{q}:jobs)
//   4 dq:{q}:ready     stream      entries {id}, consumer group "dq": ready and reserved jobs
//   5 dq:{q}:leases    sorted set  id -> lease deadline    reserved jobs (a timer index)
//   6 dq:{q}:dead      sorted set  id -> dead_at ms
//   7 dq:{q}:keys      hash        idempotency key -> id   live jobs with a key
//   8 dq:{q}:errors    hash        id -> last error
//   9 dq:{q}:counters  hash        enqueued, delivered, acked, nacked, redelivered, dead
//  10 dq:{q}:lateness  hash        histogram of delivery lateness
//  11 dq:{q}:config    hash        the queue's config and "paused"
//  12 dq:{q}:wake      (a pub/sub channel, not a key) "due <ms>" when a job becomes the
//                      earliest, "ready" when jobs became ready
//  13 dq:{q}:keyttl    hash        id -> key_ttl_ms        jobs enqueued with a key_ttl_ms
//  14 dq:{q}:kept      sorted set  key -> expiry           keys kept taken after their job was
//                                  done; their dq:{q}:keys entry is "id|due|expiry"
//  15 dq:{q}:turns     sorted set  group -> turn           while a ready job has a priority or a
//                                  group: the groups with ready jobs, oldest turn first
//  16 dq:{q}:lane:     (a prefix)  dq:{q}:lane:<group>, sorted set id -> (9 - priority) * 2^42
//                                  + due: a group's ready jobs with a priority or a group
//  17 dq:{q}:laned     sorted set  id -> due            ready and reserved jobs with a priority
//                                  or a group (the job listing's index of what the stream lacks)
//  18 dq:{q}:progress  hash        id -> "delivery|json"   a reserved job's progress, as its
//                                  delivery's last touch reported it (shown only while that
//                                  delivery holds the job; deleted with the job)
//  19 dq:{q}:done      sorted set  id -> completed_at ms   completed jobs kept (keep_completed_ms)
//  20 dq:{q}:donemeta  hash        id -> meta (state "c")  a completed job's meta: not in
//                                  dq:{q}:meta, so no script that acts on jobs meets it (with
//                                  its body, format 4); its last error stays in dq:{q}:errors
//  21 dq:{q}:results   hash        id -> result JSON       a completed job's result, when its ack
//                                  carried one
//  22 dq:{q}:waiting   sorted set  id -> until ms          jobs someone waits for the outcome of
//                                  (watch.lua): their ack keeps them, their final transition is
//                                  announced on the wake channel, "outcome <state> <id>"
//
// Priorities and groups (core/ready_order.h is the rule; the Lua below is its twin). Jobs with
// neither go through the stream as before. A ready job with one is in its group's lane set
// (meta sid "L") instead, and counted in K_COUNTERS "_lready"; while that is above 0, a reserve
// takes jobs one at a time from the group with the oldest turn (skipping groups at
// group_max_reserved), comparing the heads of its levels with the stream's next entry (the default
// group's priority 0). A reserved job with a priority or a group is not in the stream: its lease
// is its meta (state r, sid "-") and the leases set; the reaper puts it back in its lane. Leases
// per named group are K_COUNTERS "gr:<group>" (total "_gres"); such leases in all, "_lres".
//
// Meta states: s scheduled (in due), q queued (in the stream, not leased), r reserved (in the
// stream's pending list with a live lease), d dead.
//
// Leases use the pending list: a reserved job's stream entry stays pending until its ack; the
// leases sorted set holds each deadline. When one runs out, the reap script gives the entry idle
// time T (XCLAIM IDLE T JUSTID) and the next reserve claims it with XAUTOCLAIM (threshold T):
// that claim is the redelivery, and the pending list's delivery count gives its attempt
// (attempt = base + count, base counting deliveries of earlier stream entries, before a nack).
// Touch resets the idle time, so a lease held longer than T by touches is never claimable.
#pragma once
//
// Files: lua/prelude.lua (shared by every script, each sent with the part it uses), then one file
// per script, lua/<name>.lua, each starting with its arguments and answer. scripts.cc assembles
// them (Make).

#include <vector>

#include "store/redis/redis_client.h"

namespace delayq::redis {

// Above the longest lease (12 h): no delivery whose lease holds has been idle this long.
inline constexpr int64_t kClaimIdleMs = 43'200'001;

extern const Script kEnqueueScript;
extern const Script kReleaseScript;
extern const Script kPromoteScript;
extern const Script kReserveScript;
extern const Script kReapScript;
extern const Script kAckScript;
extern const Script kNackScript;
extern const Script kTouchScript;
extern const Script kCancelScript;
extern const Script kWatchScript;
extern const Script kRescheduleScript;
extern const Script kReplayScript;
extern const Script kPurgeScript;
extern const Script kDeadExpireScript;
extern const Script kDeleteQueueScript;
extern const Script kGetScript;
extern const Script kStatsScript;
extern const Script kScheduleScript;
extern const Script kBrowseScript;
// Without the prelude: a queue's schedules (schedule_store, schedule_erase) and its home config
// (create_queue).
extern const Script kStoreScheduleScript;
extern const Script kEraseScheduleScript;
extern const Script kCreateQueueScript;

// A script: the part of the shared prelude it uses (lua/prelude.lua: key names, meta_parse,
// backoff_ms, ...; prelude_subset.h) then lua/<name>.lua.
Script Make(const char* name);
// Every script above, as Redis receives it (the luacheck test lints these).
const std::vector<const Script*>& AllScripts();
// lua/prelude.lua whole, its placeholders filled (the luacheck test lints it whole too: a
// definition no script uses is linted nowhere else).
const std::string& WholePrelude();
// The same for tests that call the prelude's functions directly.
Script ProbeScript(std::string name, std::string_view body);

}  // namespace delayq::redis
