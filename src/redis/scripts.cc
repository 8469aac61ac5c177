#include "redis/scripts.h"

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
local function meta_get(id)
  local m = redis.call('HGET', K_META, id)
  if not m then return nil end
  local f, pos = {}, 1
  for i = 1, 8 do
    local s = string.find(m, '|', pos, true)
    if not s then return nil end
    f[i] = string.sub(m, pos, s - 1)
    pos = s + 1
  end
  return { state = f[1], due = tonumber(f[2]), base = tonumber(f[3]), attempt = tonumber(f[4]),
           max = tonumber(f[5]), delivery = f[6], sid = f[7], ki = f[8], key = string.sub(m, pos) }
end

local function fmt(n) return string.format('%d', n) end

local function meta_put(id, m)
  redis.call('HSET', K_META, id, table.concat({ m.state, fmt(m.due), fmt(m.base), fmt(m.attempt), fmt(m.max),
    m.delivery, m.sid, m.ki, m.key }, '|'))
end

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
  m.due = now
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

local function earliest_due()
  local first = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

local LATENESS_EDGES = { 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000 }
local function record_lateness(late_us)
  if late_us < 0 then late_us = 0 end
  local bucket = #LATENESS_EDGES + 1
  for i, edge in ipairs(LATENESS_EDGES) do
    if late_us <= edge * 1000 then bucket = i break end
  end
  redis.call('HINCRBY', K_LATENESS, 'b' .. bucket, 1)
  redis.call('HINCRBY', K_LATENESS, 'count', 1)
  redis.call('HINCRBY', K_LATENESS, 'sum_us', fmt(math.floor(late_us)))
  local max = tonumber(redis.call('HGET', K_LATENESS, 'max_us') or '0')
  if late_us > max then redis.call('HSET', K_LATENESS, 'max_us', fmt(math.floor(late_us))) end
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
// Returns per job {id, due, duplicate, replaced}; errors "delayq:INVALID:<i>:..." and
// "delayq:CONFLICT:<i>:<id>" before anything is written.
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
      return redis.error_reply('delayq:INVALID:' .. (i - 1) .. ':deliver_at is further ahead than the queue max_delay_ms')
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
      m.delivery = '0'
      m.base = m.attempt
      if j.max ~= '' then m.max = tonumber(j.max) end
    else
      m = { due = 0, base = 0, attempt = 0, max = tonumber(j.max), delivery = '0', sid = '-',
            ki = (j.key ~= '' and '1' or '0'), key = j.key }
      if j.key ~= '' then redis.call('HSET', K_KEYS, j.key, id) end
      added = added + 1
    end
    redis.call('HSET', K_JOBS, id, j.body)
    m.due = j.due
    if place(id, m, now) then
      any_ready = true
    elseif not min_new or j.due < min_new then
      min_new = j.due
    end
    meta_put(id, m)
    out[i] = { id, j.due, j.existing and 1 or 0, j.existing and 1 or 0 }
  end
end
if added > 0 then redis.call('HINCRBY', K_COUNTERS, 'enqueued', added) end
if min_new and (not earliest or min_new < earliest) then redis.call('PUBLISH', WAKE, 'due ' .. fmt(min_new)) end
if any_ready then redis.call('PUBLISH', WAKE, 'ready') end
return out
)LUA");

// ARGV: limit. Moves due jobs to the stream. Returns {moved, next_due|-1, next_lease|-1, now}.
const Script kPromoteScript = Make("promote", R"LUA(
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(ids) do
  redis.call('ZREM', K_DUE, id)
  local m = meta_get(id)
  if m then
    m.delivery = '0'
    place(id, m, now)
    meta_put(id, m)
  end
end
if #ids > 0 then redis.call('PUBLISH', WAKE, 'ready') end
local lease = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
return { #ids, earliest_due() or -1, lease[2] and tonumber(lease[2]) or -1, now }
)LUA");

// ARGV: consumer, max, lease_ms, T, then `max` delivery tokens.
// Returns per delivery {id, body, attempt, token, due, lease_deadline, max_attempts, key}.
const Script kReserveScript = Make("reserve", R"LUA(
if redis.call('HGET', K_CONFIG, 'paused') == '1' then return {} end
if redis.call('EXISTS', K_READY) == 0 then return {} end
local consumer, max, lease, T = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local nowu = now_us()
local now = math.floor(nowu / 1000)
local got = {}
-- Deliveries whose lease ran out (idle > T) are claimed first; the pending list counts them.
local cursor = redis.call('HGET', K_COUNTERS, '_claim_cursor') or '0-0'
local claimed = redis.call('XAUTOCLAIM', K_READY, GROUP, consumer, T, cursor, 'COUNT', max)
redis.call('HSET', K_COUNTERS, '_claim_cursor', claimed[1])
for _, e in ipairs(claimed[2]) do
  if e[2] and e[2][2] then
    local p = redis.call('XPENDING', K_READY, GROUP, e[1], e[1], 1)
    got[#got + 1] = { e[1], e[2][2], p[1] and tonumber(p[1][4]) or 1 }
  end
end
if #got < max then
  local r = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', max - #got, 'STREAMS', K_READY, '>')
  if r then
    for _, e in ipairs(r[1][2]) do
      if e[2] and e[2][2] then got[#got + 1] = { e[1], e[2][2], 1 } end
    end
  end
end
local out, token_at = {}, 5
for _, g in ipairs(got) do
  local sid, id, count = g[1], g[2], g[3]
  local m = meta_get(id)
  if not m or m.sid ~= sid then
    redis.call('XACK', K_READY, GROUP, sid)  -- an entry its job no longer owns
    redis.call('XDEL', K_READY, sid)
  elseif m.base + count > m.max then
    go_dead(id, m, now, 'lease expired without an ack on attempt ' .. fmt(m.attempt) .. ' of ' .. fmt(m.max))
  else
    local token = ARGV[token_at]
    token_at = token_at + 1
    redis.call('XCLAIM', K_READY, GROUP, consumer, 0, sid, 'IDLE', T - lease, 'JUSTID')
    local first = m.state == 'q' and m.delivery == '0'
    m.state = 'r'
    m.attempt = m.base + count
    m.delivery = token
    meta_put(id, m)
    redis.call('ZADD', K_LEASES, now + lease, id)
    if first then record_lateness(nowu - m.due * 1000) end
    out[#out + 1] = { id, redis.call('HGET', K_JOBS, id), m.attempt, token, m.due, now + lease, m.max, m.key }
  end
end
if #out > 0 then redis.call('HINCRBY', K_COUNTERS, 'delivered', #out) end
return out
)LUA");

// ARGV: T, limit. Handles leases that ran out: the last attempt goes dead, others become
// claimable again. Returns {handled, next_lease|-1, now}.
const Script kReapScript = Make("reap", R"LUA(
local T, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now, 'LIMIT', 0, limit)
local requeued = 0
for _, id in ipairs(ids) do
  local m = meta_get(id)
  if not m or m.state ~= 'r' or m.sid == '-' then
    redis.call('ZREM', K_LEASES, id)
  else
    local p = redis.call('XPENDING', K_READY, GROUP, m.sid, m.sid, 1)
    if not p[1] then
      redis.call('ZREM', K_LEASES, id)
    elseif tonumber(p[1][3]) < T then  -- touched since: the deadline here was stale
      redis.call('ZADD', K_LEASES, now + T - tonumber(p[1][3]), id)
    elseif m.attempt >= m.max then
      go_dead(id, m, now, 'lease expired without an ack on attempt ' .. fmt(m.attempt) .. ' of ' .. fmt(m.max))
    else
      m.state = 'q'  -- still pending (its receipt stays valid); the next reserve claims it
      meta_put(id, m)
      redis.call('ZREM', K_LEASES, id)
      redis.call('HINCRBY', K_COUNTERS, 'redelivered', 1)
      requeued = requeued + 1
    end
  end
end
if requeued > 0 then redis.call('PUBLISH', WAKE, 'ready') end
local lease = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
return { #ids, lease[2] and tonumber(lease[2]) or -1, now }
)LUA");

// ARGV: n, then n x (id, token). Returns per receipt "O" (acked), "N" (no such job) or
// "E:<state>:<attempt>" (the delivery is over).
const Script kAckScript = Make("ack", R"LUA(
local out, acked = {}, 0
for i = 1, tonumber(ARGV[1]) do
  local id, token = ARGV[2 * i], ARGV[2 * i + 1]
  local m = meta_get(id)
  if not m then
    out[i] = 'N'
  elseif m.state == 'd' or m.state == 's' or m.delivery ~= token then
    out[i] = 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max)
  else
    remove_job(id, m)
    acked = acked + 1
    out[i] = 'O'
  end
end
if acked > 0 then redis.call('HINCRBY', K_COUNTERS, 'acked', acked) end
return out
)LUA");

// ARGV: id, token, retry_ms (-1: back-off), error, dead 0|1, base_ms, factor, max_ms, jitter
// (a factor in [-jitter, jitter]). Returns {"s", due} or {"d", 0}, or "N" / "E:..." as ack.
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
  return { 'd', 0 }
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
local claimed = redis.call('XCLAIM', K_READY, GROUP, consumer, 0, m.sid, 'IDLE', T - lease, 'JUSTID')
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
// "D" (dead), "I" (too far ahead).
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
  if value > now + tonumber(ARGV[5]) then return 'I' end
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
    if m.key ~= '' and not redis.call('HGET', K_KEYS, m.key) then
      redis.call('HSET', K_KEYS, m.key, id)
      m.ki = '1'
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
