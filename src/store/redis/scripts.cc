#include "store/redis/scripts.h"

namespace delayq::redis {
namespace {

// Shared by every script (prepended to each).
constexpr const char* kPrelude = R"LUA(
local K_DUE, K_JOBS, K_META, K_READY, K_LEASES, K_DEAD = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local K_KEYS, K_ERRORS, K_COUNTERS, K_LATENESS, K_CONFIG, WAKE = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local GROUP = 'dq'

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- meta: state|due|base|attempt|max|delivery|sid|key_indexed|key (the key last: it may hold '|')
local function meta_parse(m)
  if not m then return nil end
  local state, due, base, attempt, max, delivery, sid, ki, key =
    string.match(m, '^(%a)|(%d+)|(%d+)|(%d+)|(%d+)|([^|]*)|([^|]*)|([01])|(.*)$')
  if not state then return nil end
  return { state = state, due = tonumber(due), base = tonumber(base), attempt = tonumber(attempt),
           max = tonumber(max), delivery = delivery, sid = sid, ki = ki, key = key }
end

local function meta_get(id) return meta_parse(redis.call('HGET', K_META, id)) end

local function fmt(n) return string.format('%d', n) end

local function meta_str(m)
  return string.format('%s|%d|%d|%d|%d|%s|%s|%s|%s', m.state, m.due, m.base, m.attempt, m.max, m.delivery, m.sid,
    m.ki, m.key)
end

local function meta_put(id, m) redis.call('HSET', K_META, id, meta_str(m)) end

local function ensure_group()
  if redis.call('EXISTS', K_READY) == 0 then
    redis.call('XGROUP', 'CREATE', K_READY, GROUP, '0', 'MKSTREAM')
  end
end

local function leave_stream(m)
  if m.sid ~= '-' then
    redis.call('XACK', K_READY, GROUP, m.sid)
    redis.call('XDEL', K_READY, m.sid)
    m.sid = '-'
  end
end

-- Acknowledges and deletes a list of stream entries.
local function drop_entries(sids)
  if #sids == 0 then return end
  redis.call('XACK', K_READY, GROUP, unpack(sids))
  redis.call('XDEL', K_READY, unpack(sids))
end

local function release_key(id, m)
  if m.ki == '1' then
    if redis.call('HGET', K_KEYS, m.key) == id then redis.call('HDEL', K_KEYS, m.key) end
    m.ki = '0'
  end
end

-- Deletes every trace of a job (ack, cancel, purge).
local function remove_job(id, m)
  leave_stream(m)
  release_key(id, m)
  redis.call('HDEL', K_JOBS, id)
  redis.call('HDEL', K_META, id)
  redis.call('HDEL', K_ERRORS, id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('ZREM', K_DUE, id)
  redis.call('ZREM', K_DEAD, id)
end

local function go_dead(id, m, now, err)
  leave_stream(m)
  redis.call('ZREM', K_LEASES, id)
  redis.call('ZREM', K_DUE, id)
  redis.call('ZADD', K_DEAD, now, id)
  release_key(id, m)
  if err and err ~= '' then redis.call('HSET', K_ERRORS, id, err) end
  m.state = 'd'
  m.delivery = '0'
  meta_put(id, m)
  redis.call('HINCRBY', K_COUNTERS, 'dead', 1)
end

-- Puts a live job where its due time says: the stream (due) or the due set (later).
local function place(id, m, now)
  if m.due <= now then
    ensure_group()
    m.state = 'q'
    m.sid = redis.call('XADD', K_READY, '*', 'id', id)
    return true
  end
  m.state = 's'
  m.sid = '-'
  redis.call('ZADD', K_DUE, m.due, id)
  return false
end

-- When the oldest dead job of this shard died (nil: none), for the retention sweep.
local function first_dead()
  local first = redis.call('ZRANGE', K_DEAD, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

local function earliest_due()
  local first = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

-- Lateness is gathered per script call and written once: a few HINCRBYs per batch, not per job.
local LATENESS_EDGES = { 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000 }
local function lateness_add(acc, late_us)
  if late_us < 0 then late_us = 0 end
  local bucket = #LATENESS_EDGES + 1
  for i, edge in ipairs(LATENESS_EDGES) do
    if late_us <= edge * 1000 then bucket = i break end
  end
  acc[bucket] = (acc[bucket] or 0) + 1
  acc.count = (acc.count or 0) + 1
  acc.sum = (acc.sum or 0) + math.floor(late_us)
  if late_us > (acc.max or 0) then acc.max = math.floor(late_us) end
end

local function lateness_flush(acc)
  if not acc.count then return end
  for bucket = 1, #LATENESS_EDGES + 1 do
    if acc[bucket] then redis.call('HINCRBY', K_LATENESS, 'b' .. bucket, acc[bucket]) end
  end
  redis.call('HINCRBY', K_LATENESS, 'count', acc.count)
  redis.call('HINCRBY', K_LATENESS, 'sum_us', fmt(acc.sum))
  local max = tonumber(redis.call('HGET', K_LATENESS, 'max_us') or '0')
  if acc.max > max then redis.call('HSET', K_LATENESS, 'max_us', fmt(acc.max)) end
end

-- A job addressed by id (ARGV[a]) or, when that is empty, by idempotency key (ARGV[a+1]).
local function resolve(a)
  local id = ARGV[a]
  if id == '' then
    id = redis.call('HGET', K_KEYS, ARGV[a + 1])
    if not id then return nil, nil end
  end
  return id, meta_get(id)
end
)LUA";

Script Make(const char* name, const char* body) { return Script{name, std::string(kPrelude) + body}; }

}  // namespace

// ARGV: max_delay_ms, n, then n x (id, body, mode d|a|n, value, max_attempts, key, replace 0|1)
// Returns per job {id, due, duplicate, replaced}; errors "delayq:TOO_FAR:<i>:<now>" (a deliver_at
// past max_delay_ms: the C++ side words it, with ResolveDue) and "delayq:CONFLICT:<i>:<id>",
// before anything is written.
const Script kEnqueueScript = Make("enqueue", R"LUA(
local max_delay, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = math.floor(now_us() / 1000)
local jobs, seen = {}, {}
for i = 1, n do
  local b = 2 + (i - 1) * 7
  local j = { id = ARGV[b + 1], body = ARGV[b + 2], mode = ARGV[b + 3], value = tonumber(ARGV[b + 4]),
              max = ARGV[b + 5], key = ARGV[b + 6], replace = ARGV[b + 7] == '1' }
  j.due = now
  if j.mode == 'd' then
    j.due = now + j.value
  elseif j.mode == 'a' then
    if j.value > now + max_delay then
      return redis.error_reply('delayq:TOO_FAR:' .. (i - 1) .. ':' .. fmt(now))
    end
    if j.value > now then j.due = j.value end
  end
  if j.key ~= '' then
    if seen[j.key] then
      j.dup_of = seen[j.key]
    else
      seen[j.key] = i
      local existing = redis.call('HGET', K_KEYS, j.key)
      if existing then
        local m = meta_get(existing)
        if m then
          j.existing, j.meta = existing, m
          if j.replace and m.state == 'r' then
            return redis.error_reply('delayq:CONFLICT:' .. (i - 1) .. ':' .. existing)
          end
        end
      end
    end
  end
  jobs[i] = j
end
local earliest = earliest_due()
local min_new, any_ready, added, out = nil, false, 0, {}
-- Bodies, metas and due entries go out as one variadic HSET / ZADD each: a batch costs three
-- commands, not three per job.
local bodies, metas, dues = {}, {}, {}
for i = 1, n do
  local j = jobs[i]
  if j.dup_of then
    local o = out[j.dup_of]
    out[i] = { o[1], o[2], 1, 0 }
  elseif j.existing and not j.replace then
    out[i] = { j.existing, j.meta.due, 1, 0 }
  else
    local id, m = j.existing or j.id, j.meta
    if m then
      if m.state == 's' then redis.call('ZREM', K_DUE, id) end
      leave_stream(m)
      -- Replaced: new content in the old job's place, so its attempts start again (the C++
      -- twin is EngineImpl::EnqueueImpl).
      m.delivery = '0'
      m.base, m.attempt = 0, 0
      if j.max ~= '' then m.max = tonumber(j.max) end
    else
      m = { due = 0, base = 0, attempt = 0, max = tonumber(j.max), delivery = '0', sid = '-',
            ki = (j.key ~= '' and '1' or '0'), key = j.key }
      if j.key ~= '' then redis.call('HSET', K_KEYS, j.key, id) end
      added = added + 1
    end
    bodies[#bodies + 1] = id
    bodies[#bodies + 1] = j.body
    m.due = j.due
    if j.due <= now then
      ensure_group()
      m.state = 'q'
      m.sid = redis.call('XADD', K_READY, '*', 'id', id)
      any_ready = true
    else
      m.state = 's'
      m.sid = '-'
      dues[#dues + 1] = j.due
      dues[#dues + 1] = id
      if not min_new or j.due < min_new then min_new = j.due end
    end
    metas[#metas + 1] = id
    metas[#metas + 1] = meta_str(m)
    out[i] = { id, j.due, j.existing and 1 or 0, j.existing and 1 or 0 }
  end
end
if #bodies > 0 then
  redis.call('HSET', K_JOBS, unpack(bodies))
  redis.call('HSET', K_META, unpack(metas))
end
if #dues > 0 then redis.call('ZADD', K_DUE, unpack(dues)) end
if added > 0 then redis.call('HINCRBY', K_COUNTERS, 'enqueued', added) end
if min_new and (not earliest or min_new < earliest) then redis.call('PUBLISH', WAKE, 'due ' .. fmt(min_new)) end
if any_ready then redis.call('PUBLISH', WAKE, 'ready') end
return out
)LUA");

// ARGV: limit. Moves due jobs to the stream. Returns {moved, next_due|-1, next_lease|-1, now,
// first_dead|-1}.
const Script kPromoteScript = Make("promote", R"LUA(
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
if #ids > 0 then
  redis.call('ZREM', K_DUE, unpack(ids))
  local found, metas = redis.call('HMGET', K_META, unpack(ids)), {}
  for i, id in ipairs(ids) do
    local m = meta_parse(found[i])
    if m then
      m.delivery = '0'
      place(id, m, now)
      metas[#metas + 1] = id
      metas[#metas + 1] = meta_str(m)
    end
  end
  if #metas > 0 then redis.call('HSET', K_META, unpack(metas)) end
  redis.call('PUBLISH', WAKE, 'ready')
end
local lease = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
return { #ids, earliest_due() or -1, lease[2] and tonumber(lease[2]) or -1, now, first_dead() or -1 }
)LUA");

// ARGV: consumer, max, lease_ms, T, then `max` delivery tokens.
// Returns per delivery {id, body, attempt, token, due, lease_deadline, max_attempts, key}.
const Script kReserveScript = Make("reserve", R"LUA(
if redis.call('HGET', K_CONFIG, 'paused') == '1' then return {} end
if redis.call('EXISTS', K_READY) == 0 then return {} end
local consumer, max, lease, T = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local max_bytes, first_free = tonumber(ARGV[5]), ARGV[6] == '1'
local nowu = now_us()
local now = math.floor(nowu / 1000)
local got = {}
-- The answer stops before the job whose stored record would take it over max_bytes (the first
-- job always comes when first_free): the embedded store's rule (ReserveLocked), on the same
-- encoded records. Entries are peeked and sized before they are taken from the stream.
local bytes, taken = 0, 0
local function fits(id)
  local n = redis.call('HSTRLEN', K_JOBS, id)
  if bytes + n > max_bytes and not (first_free and taken == 0) then return false end
  bytes, taken = bytes + n, taken + 1
  return true
end
-- Deliveries whose lease ran out (idle > T) are claimed first; the pending list counts them.
-- Only scanned while the reaper has flagged run-out leases ('_claim'); the flag goes when one
-- scan from the start of the pending list reaches its end without filling the batch.
if redis.call('HGET', K_COUNTERS, '_claim') then
  local cursor = redis.call('HGET', K_COUNTERS, '_claim_cursor') or '0-0'
  local n, whole = 0, true
  for _, p in ipairs(redis.call('XPENDING', K_READY, GROUP, 'IDLE', T, cursor, '+', max)) do
    local e = redis.call('XRANGE', K_READY, p[1], p[1])
    if e[1] and e[1][2] and e[1][2][2] and not fits(e[1][2][2]) then
      whole = false
      break
    end
    n = n + 1
  end
  if n > 0 then
    local claimed = redis.call('XAUTOCLAIM', K_READY, GROUP, consumer, T, cursor, 'COUNT', n)
    for _, e in ipairs(claimed[2]) do
      if e[2] and e[2][2] then
        local p = redis.call('XPENDING', K_READY, GROUP, e[1], e[1], 1)
        got[#got + 1] = { e[1], e[2][2], p[1] and tonumber(p[1][4]) or 1 }
      end
    end
    if whole and cursor == '0-0' and claimed[1] == '0-0' and #claimed[2] < max then
      redis.call('HDEL', K_COUNTERS, '_claim', '_claim_cursor')
    else
      redis.call('HSET', K_COUNTERS, '_claim_cursor', claimed[1])
    end
  elseif whole then
    if cursor == '0-0' then
      redis.call('HDEL', K_COUNTERS, '_claim', '_claim_cursor')
    else
      redis.call('HSET', K_COUNTERS, '_claim_cursor', '0-0')
    end
  end
end
if #got < max and (taken == 0 or bytes < max_bytes) then
  local last = '0-0'
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', K_READY)) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f['name'] == GROUP then last = f['last-delivered-id'] end
  end
  local n = 0
  for _, e in ipairs(redis.call('XRANGE', K_READY, '(' .. last, '+', 'COUNT', max - #got)) do
    if e[2] and e[2][2] and not fits(e[2][2]) then break end
    n = n + 1
  end
  if n > 0 then
    local r = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', n, 'STREAMS', K_READY, '>')
    if r then
      for _, e in ipairs(r[1][2]) do
        if e[2] and e[2][2] then got[#got + 1] = { e[1], e[2][2], 1 } end
      end
    end
  end
end
-- One HMGET for the metas, one HSET, one ZADD and one HMGET for the bodies, whatever the batch
-- size.
local ids = {}
for i, g in ipairs(got) do ids[i] = g[2] end
local found = #ids > 0 and redis.call('HMGET', K_META, unpack(ids)) or {}
local out, token_at, acc = {}, 7, {}
local stale, metas, leases, body_ids = {}, {}, {}, {}
for i, g in ipairs(got) do
  local sid, id, count = g[1], g[2], g[3]
  local m = meta_parse(found[i])
  if not m or m.sid ~= sid then
    stale[#stale + 1] = sid  -- an entry its job no longer owns
  elseif m.base + count > m.max then
    go_dead(id, m, now, 'lease expired without an ack on attempt ' .. fmt(m.attempt) .. ' of ' .. fmt(m.max))
  else
    local token = ARGV[token_at]
    token_at = token_at + 1
    if m.state == 'q' and m.delivery == '0' then lateness_add(acc, nowu - m.due * 1000) end
    m.state = 'r'
    m.attempt = m.base + count
    m.delivery = token
    metas[#metas + 1] = id
    metas[#metas + 1] = meta_str(m)
    leases[#leases + 1] = now + lease
    leases[#leases + 1] = id
    body_ids[#body_ids + 1] = id
    out[#out + 1] = { id, false, m.attempt, token, m.due, now + lease, m.max, m.key }
  end
end
drop_entries(stale)
if #out > 0 then
  redis.call('HSET', K_META, unpack(metas))
  redis.call('ZADD', K_LEASES, unpack(leases))
  local bodies = redis.call('HMGET', K_JOBS, unpack(body_ids))
  for i, o in ipairs(out) do o[2] = bodies[i] end
end
lateness_flush(acc)
if #out > 0 then redis.call('HINCRBY', K_COUNTERS, 'delivered', #out) end
return out
)LUA");

// ARGV: T, limit. Handles leases that ran out (the leases set holds each deadline): the last
// attempt goes dead; others get idle time T, which makes XAUTOCLAIM in the next reserve claim
// them, and the '_claim' flag tells reserve to look. Returns {handled, next_lease|-1, now,
// first_dead|-1}.
const Script kReapScript = Make("reap", R"LUA(
local T, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now, 'LIMIT', 0, limit)
local requeued = 0
for _, id in ipairs(ids) do
  local m = meta_get(id)
  redis.call('ZREM', K_LEASES, id)
  if m and m.state == 'r' and m.sid ~= '-' then
    if m.attempt >= m.max then
      go_dead(id, m, now, 'lease expired without an ack on attempt ' .. fmt(m.attempt) .. ' of ' .. fmt(m.max))
    elseif redis.call('XCLAIM', K_READY, GROUP, 'reaper', 0, m.sid, 'IDLE', T, 'JUSTID')[1] then
      m.state = 'q'  -- still pending (its receipt stays valid until another reserve claims it)
      meta_put(id, m)
      requeued = requeued + 1
    end
  end
end
if requeued > 0 then
  redis.call('HINCRBY', K_COUNTERS, 'redelivered', requeued)
  redis.call('HSET', K_COUNTERS, '_claim', '1')
  redis.call('PUBLISH', WAKE, 'ready')
end
local lease = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
return { #ids, lease[2] and tonumber(lease[2]) or -1, now, first_dead() or -1 }
)LUA");

// ARGV: n, then n x (id, token). Returns per receipt "O" (acked), "N" (no such job) or
// "E:<state>:<attempt>" (the delivery is over).
const Script kAckScript = Make("ack", R"LUA(
local n = tonumber(ARGV[1])
if n == 0 then return {} end
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i] end
local found = redis.call('HMGET', K_META, unpack(ids))
local out, acked, done, sids, gone = {}, 0, {}, {}, {}
for i = 1, n do
  local id, token = ids[i], ARGV[2 * i + 1]
  local m = meta_parse(found[i])
  if not m or done[id] then
    out[i] = 'N'
  elseif m.state == 'd' or m.state == 's' or m.delivery ~= token then
    out[i] = 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max)
  else
    -- A job with a live delivery is in the stream and the lease set, never the due or dead set.
    done[id] = true
    if m.sid ~= '-' then sids[#sids + 1] = m.sid end
    release_key(id, m)
    gone[#gone + 1] = id
    acked = acked + 1
    out[i] = 'O'
  end
end
drop_entries(sids)
if #gone > 0 then
  redis.call('HDEL', K_JOBS, unpack(gone))
  redis.call('HDEL', K_META, unpack(gone))
  redis.call('HDEL', K_ERRORS, unpack(gone))
  redis.call('ZREM', K_LEASES, unpack(gone))
end
if acked > 0 then redis.call('HINCRBY', K_COUNTERS, 'acked', acked) end
return out
)LUA");

// ARGV: id, token, retry_ms (-1: back-off), error, dead 0|1, base_ms, factor, max_ms, jitter
// (a factor in [-jitter, jitter]). Returns {"s", due} or {"d", due, dead_at}, or "N" / "E:..." as
// ack. A job that goes dead keeps the due time it had (as on the embedded store).
const Script kNackScript = Make("nack", R"LUA(
local id, token = ARGV[1], ARGV[2]
local m = meta_get(id)
if not m then return 'N' end
if m.state == 'd' or m.state == 's' or m.delivery ~= token then
  return 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max)
end
local now = math.floor(now_us() / 1000)
redis.call('HINCRBY', K_COUNTERS, 'nacked', 1)
if ARGV[5] == '1' or m.attempt >= m.max then
  go_dead(id, m, now, ARGV[4])
  return { 'd', m.due, now }
end
local delay = tonumber(ARGV[3])
if delay < 0 then
  local base, factor, max_ms = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
  delay = base * factor ^ (m.attempt - 1)
  if delay > max_ms then delay = max_ms end
  delay = delay * (1 + tonumber(ARGV[9]))
  if delay > max_ms then delay = max_ms end
  if delay < 0 then delay = 0 end
  delay = math.floor(delay + 0.5)
end
leave_stream(m)
redis.call('ZREM', K_LEASES, id)
redis.call('HSET', K_ERRORS, id, ARGV[4])
local earliest = earliest_due()
m.base = m.attempt
m.delivery = '0'
m.due = now + delay
if place(id, m, now) then
  redis.call('PUBLISH', WAKE, 'ready')
elseif not earliest or m.due < earliest then
  redis.call('PUBLISH', WAKE, 'due ' .. fmt(m.due))
end
meta_put(id, m)
return { 's', m.due }
)LUA");

// ARGV: id, token, lease_ms, T, consumer. Returns the new lease deadline, or "N" / "E:..." as ack.
const Script kTouchScript = Make("touch", R"LUA(
local id, token, lease, T, consumer = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local m = meta_get(id)
if not m then return 'N' end
if (m.state ~= 'r' and m.state ~= 'q') or m.delivery ~= token or m.sid == '-' then
  return 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max)
end
-- Idle time back to 0: a claimable delivery (state q, after the reaper) is not any more, and a
-- lease touched for longer than T cannot become claimable while it holds.
local claimed = redis.call('XCLAIM', K_READY, GROUP, consumer, 0, m.sid, 'IDLE', 0, 'JUSTID')
if not claimed[1] then return 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max) end
local now = math.floor(now_us() / 1000)
m.state = 'r'
meta_put(id, m)
redis.call('ZADD', K_LEASES, now + lease, id)
return now + lease
)LUA");

// ARGV: id, key. Returns "O", "N" (no such job) or "C" (reserved).
const Script kCancelScript = Make("cancel", R"LUA(
local id, m = resolve(1)
if not m then return 'N' end
if m.state == 'r' then return 'C' end
remove_job(id, m)
return 'O'
)LUA");

// ARGV: id, key, mode d|a, value, max_delay_ms. Returns {id, due}, or "N", "C" (reserved),
// "D" (dead), "I:<now>" (too far ahead).
const Script kRescheduleScript = Make("reschedule", R"LUA(
local id, m = resolve(1)
if not m then return 'N' end
if m.state == 'r' then return 'C' end
if m.state == 'd' then return 'D' end
local now = math.floor(now_us() / 1000)
local due, value = now, tonumber(ARGV[4])
if ARGV[3] == 'd' then
  due = now + value
else
  if value > now + tonumber(ARGV[5]) then return 'I:' .. fmt(now) end
  if value > now then due = value end
end
if m.state == 's' then redis.call('ZREM', K_DUE, id) end
leave_stream(m)
local earliest = earliest_due()
m.base = m.attempt
m.delivery = '0'
m.due = due
if place(id, m, now) then
  redis.call('PUBLISH', WAKE, 'ready')
elseif not earliest or due < earliest then
  redis.call('PUBLISH', WAKE, 'due ' .. fmt(due))
end
meta_put(id, m)
return { id, due }
)LUA");

// ARGV: limit, then ids (none: the oldest `limit` dead jobs). Returns how many were replayed.
const Script kReplayScript = Make("replay", R"LUA(
local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[1]) - 1)
end
local now = math.floor(now_us() / 1000)
local n = 0
for _, id in ipairs(ids) do
  local m = meta_get(id)
  if m and m.state == 'd' then
    redis.call('ZREM', K_DEAD, id)
    m.base, m.attempt, m.delivery, m.due = 0, 0, '0', now
    -- The key comes back unless a live job holds it now; then the job comes back without
    -- one. The C++ twin is EngineImpl::ReplayDead.
    if m.key ~= '' then
      if redis.call('HGET', K_KEYS, m.key) then
        m.key, m.ki = '', '0'
      else
        redis.call('HSET', K_KEYS, m.key, id)
        m.ki = '1'
      end
    end
    place(id, m, now)
    meta_put(id, m)
    n = n + 1
  end
end
if n > 0 then redis.call('PUBLISH', WAKE, 'ready') end
return n
)LUA");

// ARGV: limit. Deletes the oldest `limit` dead jobs; returns how many.
const Script kPurgeScript = Make("purge", R"LUA(
local ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[1]) - 1)
for _, id in ipairs(ids) do
  local m = meta_get(id)
  if m then remove_job(id, m) else redis.call('ZREM', K_DEAD, id) end
end
return #ids
)LUA");

// ARGV: retention_ms, limit. Deletes up to `limit` dead jobs that died retention_ms or more ago
// (the embedded store's twin: EngineImpl::SweepDeadLocked). Returns {deleted, first_dead|-1, now}.
const Script kDeadExpireScript = Make("dead_expire", R"LUA(
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_DEAD, '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  local m = meta_get(id)
  if m then remove_job(id, m) else redis.call('ZREM', K_DEAD, id) end
end
return { #ids, first_dead() or -1, now }
)LUA");

// ARGV: force ('1'). Deletes every key of this shard of a queue; without force only when it
// holds no job (every job, live or dead, has a meta entry). Returns {deleted (0/1), jobs}.
const Script kDeleteQueueScript = Make("delete_queue", R"LUA(
local jobs = redis.call('HLEN', K_META)
if jobs > 0 and ARGV[1] ~= '1' then return {0, jobs} end
redis.call('UNLINK', K_DUE, K_JOBS, K_META, K_READY, K_LEASES, K_DEAD, K_KEYS, K_ERRORS, K_COUNTERS,
  K_LATENESS, K_CONFIG)
return {1, jobs}
)LUA");

// ARGV: id, key. Returns {id, meta, body, last_error, lease_deadline|"", dead_at|"", now} or nil.
const Script kGetScript = Make("get", R"LUA(
local id = ARGV[1]
if id == '' then
  id = redis.call('HGET', K_KEYS, ARGV[2])
  if not id then return false end
end
local meta = redis.call('HGET', K_META, id)
if not meta then return false end
return { id, meta, redis.call('HGET', K_JOBS, id) or '', redis.call('HGET', K_ERRORS, id) or '',
         redis.call('ZSCORE', K_LEASES, id) or '', redis.call('ZSCORE', K_DEAD, id) or '',
         math.floor(now_us() / 1000) }
)LUA");

// Returns {scheduled, ready, reserved, dead, due_next_60s, earliest|-1, oldest_ready_ms, paused,
// counters (flat), lateness (flat), now}.
const Script kStatsScript = Make("stats", R"LUA(
local now = math.floor(now_us() / 1000)
local scheduled = redis.call('ZCARD', K_DUE)
local reserved = redis.call('ZCARD', K_LEASES)
local dead = redis.call('ZCARD', K_DEAD)
local ready, oldest = 0, 0
if redis.call('EXISTS', K_READY) == 1 then
  ready = redis.call('XLEN', K_READY) - reserved
  if ready < 0 then ready = 0 end
  local last = '0-0'
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', K_READY)) do
    for i = 1, #g, 2 do
      if g[i] == 'name' and g[i + 1] ~= GROUP then break end
      if g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
  end
  local first = redis.call('XRANGE', K_READY, '(' .. last, '+', 'COUNT', 1)
  if first[1] then
    local ms = tonumber(string.match(first[1][1], '^(%d+)'))
    if ms and now > ms then oldest = now - ms end
  end
end
local due60 = redis.call('ZCOUNT', K_DUE, '-inf', now + 60000)
return { scheduled, ready, reserved, dead, due60, earliest_due() or -1, oldest,
         redis.call('HGET', K_CONFIG, 'paused') == '1' and 1 or 0,
         redis.call('HGETALL', K_COUNTERS), redis.call('HGETALL', K_LATENESS), now }
)LUA");

// ARGV: bucket_ms, n. Counts scheduled jobs per bucket from the current minute.
// Returns {start, later, count_0, ..., count_n-1}.
const Script kScheduleScript = Make("schedule", R"LUA(
local now = math.floor(now_us() / 1000)
local start = now - now % 60000
local bucket, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = { start, redis.call('ZCOUNT', K_DUE, '(' .. fmt(start + n * bucket - 1), '+inf') }
for i = 0, n - 1 do
  local lo = (i == 0) and '-inf' or fmt(start + i * bucket)
  out[#out + 1] = redis.call('ZCOUNT', K_DUE, lo, '(' .. fmt(start + (i + 1) * bucket))
end
return out
)LUA");

}  // namespace delayq::redis
