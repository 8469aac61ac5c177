-- Shared by every script: each is sent with the definitions below that it uses, and those theirs
-- use (prelude_subset.h: keep each definition at column 0, starting with `local`, its comment just
-- above it). The placeholders (a name between two at signs) are filled from the C++ constants they
-- mirror (WholePrelude()), so the two cannot drift: META_FORMAT and RECORD_IN_META_MAX (redis_meta.h),
-- LATENESS_EDGES (LatenessSummary::kLatenessBucketsMs).
-- A script uses some of what it is sent (a function it calls may set a flag only another reads),
-- so unused locals and ones set but never read are no defect:
-- luacheck: push ignore 211 231 241
local K_DUE, K_JOBS, K_META, K_READY, K_LEASES, K_DEAD = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local K_KEYS, K_ERRORS, K_COUNTERS, K_LATENESS, K_CONFIG, WAKE = KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local K_KEYTTL, K_KEPT, K_TURNS, K_LANE, K_LANED = KEYS[13], KEYS[14], KEYS[15], KEYS[16], KEYS[17]
local K_PROGRESS, K_DONE, K_DONEMETA, K_RESULTS, K_WAITING = KEYS[18], KEYS[19], KEYS[20], KEYS[21], KEYS[22]
local GROUP = 'dq'

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- meta, format 2: "2|state|due|base|attempt|max|delivery|sid|key_indexed|key" (the key last: it
-- may hold '|'); format 3, only for a job with a priority or a group: "3|...|key_indexed|priority|
-- group length|" then the group and the key; format 1 had no version. Format 4 is a job's one
-- entry: "4|<length>|", a format 2 or 3 meta of that length, then the job's record (which formats
-- 1-3 kept in K_JOBS: such a job keeps it there until it leaves). redis_meta.h describes them;
-- ParseMeta is the C++ twin. A format newer than @META_FORMAT@ stops the script with an error rather
-- than misreading it (a server of this release refuses at open a Redis whose dq:format is newer,
-- so this is the second guard).
local META_FORMAT = @META_FORMAT@
local RECORD_IN_META_MAX = @RECORD_IN_META_MAX@  -- a bigger record stays in K_JOBS

-- Where a format 4 value's meta starts and ends; nil for an older value (all meta, its record in
-- K_JOBS).
local function meta_bounds(v)
  local n, at = string.match(v, '^4|(%d+)|()')
  if not n or #n > 9 then return nil end  -- (a meta is far shorter: such a value is not one)
  local stop = at + tonumber(n) - 1
  if stop > #v then return nil end  -- longer than the value: corrupt, as ParseMeta says
  return at, stop
end

-- A value's meta and record (nil: in K_JOBS), for the answers that carry both. A value that is
-- not a format 4 one holding a format 2 or 3 meta goes whole, for ParseMeta to judge.
local function meta_split(v)
  local from, to = meta_bounds(v)
  if not from or not string.find(v, '^[23]|', from) then return v, nil end
  return string.sub(v, from, to), string.sub(v, to + 1)
end

-- The fields are matched in place (positions, not copies): a format 4 value's record is cut out
-- only by what needs it (body_of, meta_str), not by every script that reads the meta.
local function meta_parse(v)
  if not v then return nil end
  local from, stop = meta_bounds(v)
  local at = from or 1
  stop = stop or #v
  local version = string.match(v, '^(%d+)|', at)
  if from and not version then return nil end  -- format 4 holds a versioned meta
  if version then
    if not from and tonumber(version) > META_FORMAT then
      error('delayq:FORMAT: a job meta has format ' .. version .. ', newer than this delayq reads (' ..
        META_FORMAT .. '); upgrade every delayq server that shares this Redis')
    end
    -- A versioned meta is "2|" or "3|", alone or inside format 4 (ParseMeta's rule).
    if version ~= '2' and version ~= '3' then return nil end
    at = at + #version + 1
  end
  local state, due, base, attempt, max, delivery, sid, ki, kat =
    string.match(v, '^(%a)|(%d+)|(%d+)|(%d+)|(%d+)|([^|]*)|([^|]*)|([01])|()', at)
  if not state or kat > stop + 1 then return nil end
  local prio, grp = 0, ''
  if version == '3' then
    local p, glen, gat = string.match(v, '^(%d)|(%d+)|()', kat)
    if not p or gat + tonumber(glen) > stop + 1 then return nil end
    prio, glen = tonumber(p), tonumber(glen)
    grp, kat = string.sub(v, gat, gat + glen - 1), gat + glen
  end
  return { state = state, due = tonumber(due), base = tonumber(base), attempt = tonumber(attempt),
           max = tonumber(max), delivery = delivery, sid = sid, ki = ki, key = string.sub(v, kat, stop),
           prio = prio, grp = grp, v = from and v, body_at = from and stop + 1 }
end

-- Whether a job's record is in its meta (format 4; m.body: a new one), not in K_JOBS.
local function has_record(m) return m.body ~= nil or m.body_at ~= nil end

-- Whether a job has a priority or a group: it is ordered by the lanes, not the stream.
local function laned(m) return m.prio > 0 or m.grp ~= '' end

local function meta_get(id) return meta_parse(redis.call('HGET', K_META, id)) end

local function fmt(n) return string.format('%d', n) end

-- Format 4 for a job whose record is in the meta (m.body), else 2 or 3 (its record in K_JOBS).
local function meta_str(m)
  local s
  if laned(m) then
    s = string.format('3|%s|%d|%d|%d|%d|%s|%s|%s|%d|%d|%s%s', m.state, m.due, m.base, m.attempt, m.max,
      m.delivery, m.sid, m.ki, m.prio, #m.grp, m.grp, m.key)
  else
    s = string.format('2|%s|%d|%d|%d|%d|%s|%s|%s|%s', m.state, m.due, m.base, m.attempt, m.max,
      m.delivery, m.sid, m.ki, m.key)
  end
  if not m.body and m.body_at then m.body = string.sub(m.v, m.body_at) end  -- cut out once
  if m.body then return '4|' .. #s .. '|' .. s .. m.body end
  return s
end

-- The record of a job (its meta as meta_parse gave it).
local function body_of(id, m)
  if not m.body and m.body_at then m.body = string.sub(m.v, m.body_at) end
  return m.body or redis.call('HGET', K_JOBS, id) or ''
end

-- Ready and reserved jobs with a priority or a group wait in lanes or hold leases outside the
-- stream; K_LANED lists them by due time, for the job listing (kBrowseScript). Kept with every
-- meta written (a job without either is never in it, and costs nothing here).
local function laned_index(id, m)
  if not laned(m) then return end
  if m.state == 'q' or m.state == 'r' then
    redis.call('ZADD', K_LANED, m.due, id)
  else
    redis.call('ZREM', K_LANED, id)
  end
end

local function meta_put(id, m)
  redis.call('HSET', K_META, id, meta_str(m))
  laned_index(id, m)
end

local function ensure_group()
  if redis.call('EXISTS', K_READY) == 0 then
    redis.call('XGROUP', 'CREATE', K_READY, GROUP, '0', 'MKSTREAM')
  end
end

-- The consumer group's last-delivered entry id of the stream ('0-0': none).
local function last_delivered()
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', K_READY)) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f['name'] == GROUP then return f['last-delivered-id'] end
  end
  return '0-0'
end

-- The stream's next entry a reserve would read (nil: none), as {sid, {'id', id}}.
local function stream_next()
  if redis.call('EXISTS', K_READY) == 0 then return nil end
  return redis.call('XRANGE', K_READY, '(' .. last_delivered(), '+', 'COUNT', 1)[1]
end

-- Lanes: core/ready_order.h's rule (see scripts.h). A group joins the turns at the back when it
-- gets its first ready job, and leaves them when it has none; the default group ('') has ready
-- jobs in the stream too. When no ready job has a priority or a group ('_lready' 0) the turns go,
-- and reserves read the stream in order again (as the embedded store's ReadyJobs).
local LEVEL = 4398046511104  -- 2^42: (9 - priority) * LEVEL + due is exact in a double
local function lane_key(grp) return K_LANE .. grp end
local ordering = nil  -- whether the turns exist, once looked up in this script
local function ordered()
  if ordering == nil then ordering = redis.call('EXISTS', K_TURNS) == 1 end
  return ordering
end
local function turn_join(grp)
  if not redis.call('ZSCORE', K_TURNS, grp) then
    redis.call('ZADD', K_TURNS, redis.call('HINCRBY', K_COUNTERS, '_turn', 1), grp)
  end
  ordering = true
end
local function turn_check(grp)
  if redis.call('EXISTS', lane_key(grp)) == 1 then return end
  if grp == '' and (stream_next() or redis.call('HGET', K_COUNTERS, '_claim')) then return end
  redis.call('ZREM', K_TURNS, grp)
end
-- A ready job with a priority or a group goes into its lane.
local function lane_add(id, m)
  if not ordered() and (stream_next() or redis.call('HGET', K_COUNTERS, '_claim')) then
    turn_join('')  -- the ready jobs already in the stream are the default group's, and first
  end
  turn_join(m.grp)
  redis.call('ZADD', lane_key(m.grp), fmt((9 - m.prio) * LEVEL + m.due), id)
  redis.call('HINCRBY', K_COUNTERS, '_lready', 1)
  m.state = 'q'
  m.sid = 'L'
end
-- Out of its lane (taken, cancelled, replaced, moved).
local function lane_remove(id, m)
  if m.sid ~= 'L' then return end
  m.sid = '-'
  if redis.call('ZREM', lane_key(m.grp), id) == 0 then return end
  if redis.call('HINCRBY', K_COUNTERS, '_lready', -1) <= 0 then
    redis.call('HDEL', K_COUNTERS, '_lready')
    redis.call('DEL', K_TURNS)
    ordering = false
  else
    turn_check(m.grp)
  end
end
-- A reserved job with a priority or a group leaves its lease (acked, nacked, dead, back to ready):
-- the counts of such leases go down.
local function lane_unlease(m)
  if m.state ~= 'r' or not laned(m) then return end
  redis.call('HINCRBY', K_COUNTERS, '_lres', -1)
  if m.grp ~= '' then
    local key = 'gr:' .. m.grp
    if redis.call('HINCRBY', K_COUNTERS, key, -1) <= 0 then redis.call('HDEL', K_COUNTERS, key) end
    redis.call('HINCRBY', K_COUNTERS, '_gres', -1)
  end
end
local function lane_lease(m)
  redis.call('HINCRBY', K_COUNTERS, '_lres', 1)
  if m.grp ~= '' then
    redis.call('HINCRBY', K_COUNTERS, 'gr:' .. m.grp, 1)
    redis.call('HINCRBY', K_COUNTERS, '_gres', 1)
  end
end

-- The same counts changed by a batch (reserve, ack), written once at its end: one HINCRBY per
-- group served, not up to three per job. lane_tally_lease(t, m) and lane_tally_unlease(t, m) are
-- lane_lease and lane_unlease; lane_tally_flush(t) writes them.
local function lane_tally_new() return { all = 0, named = 0, groups = {} } end
local function lane_tally_add(t, m, delta)
  t.all = t.all + delta
  if m.grp ~= '' then
    t.named = t.named + delta
    t.groups[m.grp] = (t.groups[m.grp] or 0) + delta
  end
end
local function lane_tally_lease(t, m) lane_tally_add(t, m, 1) end
local function lane_tally_unlease(t, m)
  if m.state == 'r' and laned(m) then lane_tally_add(t, m, -1) end
end
local function lane_tally_flush(t)
  if t.all ~= 0 then redis.call('HINCRBY', K_COUNTERS, '_lres', t.all) end
  for g, d in pairs(t.groups) do
    local key = 'gr:' .. g
    if d ~= 0 and redis.call('HINCRBY', K_COUNTERS, key, d) <= 0 then redis.call('HDEL', K_COUNTERS, key) end
  end
  if t.named ~= 0 then redis.call('HINCRBY', K_COUNTERS, '_gres', t.named) end
end

local function leave_stream(m, id)
  if m.sid == 'L' then
    lane_remove(id, m)
  elseif m.sid ~= '-' then
    redis.call('XACK', K_READY, GROUP, m.sid)
    redis.call('XDEL', K_READY, m.sid)
    m.sid = '-'
    if ordered() then turn_check('') end
  end
end

-- Acknowledges and deletes a list of stream entries.
local function drop_entries(sids)
  if #sids == 0 then return end
  redis.call('XACK', K_READY, GROUP, unpack(sids))
  redis.call('XDEL', K_READY, unpack(sids))
end

-- A key kept taken after its job was done (key_ttl_ms) is 'id|due|expiry' in K_KEYS (a live
-- job's entry is its id) and has its expiry in K_KEPT. The C++ twin is KeptKey (embedded keys.h).
local function kept_parse(v)
  if not v then return nil end
  local id, due, expiry = string.match(v, '^([^|]+)|(%d+)|(%d+)$')
  if not id then return nil end
  return id, tonumber(due), tonumber(expiry)
end

-- Who holds `key` at `now`: the live job's id, or the done job's id and due time while its key
-- is kept; nil when the key is free.
local function key_holder(key, now)
  local v = redis.call('HGET', K_KEYS, key)
  if not v then return nil end
  local id, due, expiry = kept_parse(v)
  if not id then return v end
  if expiry > now then return id, due end
  return nil
end

-- Releases the key of a job that leaves. With `now` (ack, cancel) and the job's key_ttl_ms, the
-- key stays taken until now + key_ttl_ms; up to two kept keys whose time ran out go first, so
-- they cannot pile up (the C++ twin is EngineImpl::ReleaseKeyLocked).
local function release_key(id, m, now)
  if m.ki == '1' then
    if redis.call('HGET', K_KEYS, m.key) == id then
      local ttl = now and tonumber(redis.call('HGET', K_KEYTTL, id) or '0') or 0
      if ttl > 0 then
        for _, k in ipairs(redis.call('ZRANGEBYSCORE', K_KEPT, '-inf', now, 'LIMIT', 0, 2)) do
          local kid, _, expiry = kept_parse(redis.call('HGET', K_KEYS, k))
          if kid and expiry <= now then redis.call('HDEL', K_KEYS, k) end
          redis.call('ZREM', K_KEPT, k)
        end
        redis.call('HSET', K_KEYS, m.key, id .. '|' .. string.format('%d', m.due) .. '|' ..
          string.format('%d', now + ttl))
        redis.call('ZADD', K_KEPT, now + ttl, m.key)
      else
        redis.call('HDEL', K_KEYS, m.key)
      end
    end
    m.ki = '0'
  end
end

-- Deletes every trace of a job (ack, cancel with `now`; purge).
local function remove_job(id, m, now)
  if laned(m) then redis.call('ZREM', K_LANED, id) end
  lane_unlease(m)
  leave_stream(m, id)
  release_key(id, m, now)
  redis.call('HDEL', K_KEYTTL, id)
  if not has_record(m) then redis.call('HDEL', K_JOBS, id) end
  redis.call('HDEL', K_META, id)
  redis.call('HDEL', K_ERRORS, id)
  redis.call('HDEL', K_PROGRESS, id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('ZREM', K_DUE, id)
  redis.call('ZREM', K_DEAD, id)
end

-- Waits for an outcome (K_WAITING: id -> until ms, written by watch.lua): a job someone waits
-- for is kept when acked (as with keep_completed_ms), and its final transition is announced on the
-- wake channel, "outcome <state> <id>", once (its entry goes). One EXISTS per script otherwise.
local waiting_any = nil
local function waited(id)
  if waiting_any == nil then waiting_any = redis.call('EXISTS', K_WAITING) == 1 end
  return waiting_any and redis.call('ZSCORE', K_WAITING, id) ~= false
end
local function announce_outcome(id, state)
  if not waited(id) then return end
  redis.call('ZREM', K_WAITING, id)
  redis.call('PUBLISH', WAKE, 'outcome ' .. state .. ' ' .. id)
end

local function go_dead(id, m, now, err)
  lane_unlease(m)
  leave_stream(m, id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('ZREM', K_DUE, id)
  redis.call('ZADD', K_DEAD, now, id)
  release_key(id, m)
  if err and err ~= '' then redis.call('HSET', K_ERRORS, id, err) end
  redis.call('HDEL', K_PROGRESS, id)
  m.state = 'd'
  m.delivery = '0'
  meta_put(id, m)
  redis.call('HINCRBY', K_COUNTERS, 'dead', 1)
  announce_outcome(id, 'dead')
end

-- A ready job without a priority or a group: into the stream (the default group's, when lanes
-- order the reserves).
local function stream_add(id, m)
  ensure_group()
  m.state = 'q'
  m.sid = redis.call('XADD', K_READY, '*', 'id', id)
  if ordered() then turn_join('') end
end

-- Puts a live job where its due time says: the stream or its lane (due) or the due set (later).
local function place(id, m, now)
  if m.due <= now then
    if laned(m) then
      lane_add(id, m)
    else
      stream_add(id, m)
    end
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

local function first_done()
  local first = redis.call('ZRANGE', K_DONE, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

local function earliest_due()
  local first = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

-- Lateness is gathered per script call and written once: a few HINCRBYs per batch, not per job.
local LATENESS_EDGES = { @LATENESS_EDGES@ }
local function lateness_add(acc, late_us)
  if late_us < 0 then late_us = 0 end
  local bucket = #LATENESS_EDGES + 1
  for i, edge in ipairs(LATENESS_EDGES) do
    if late_us <= edge * 1000 then bucket = i break end
  end
  acc[bucket] = (acc[bucket] or 0) + 1
  acc.count = (acc.count or 0) + 1
  acc.sum = (acc.sum or 0) + math.floor(late_us)
  acc.max = math.max(acc.max or 0, math.floor(late_us))  -- set even for 0: lateness_flush reads it
end

-- A first delivery's wait split (core/flow_control.h's SplitLateness, RedisScripts twin test):
-- late until a limit started holding it at `since` (-1: not held), then held back by the limit.
-- Returns the lateness and the limit wait (-1: not held), in µs.
local function lateness_split(due_us, since, now)
  if since < 0 or since >= now then return now - due_us, -1 end
  local held_from = math.max(due_us, since)
  return math.max(0, held_from - due_us), math.max(0, now - held_from)
end

-- Whether a record of n bytes still goes into an answer of `bytes` under max_bytes (`free`: it is
-- the answer's first job, which always comes): core/flow_control.h's AnswerFits.
local function answer_fits(bytes, n, max_bytes, free)
  return free or bytes + n <= max_bytes
end

-- `prefix` '' for the lateness, 'w' for the time flow control held first deliveries back.
local function lateness_flush(acc, prefix)
  if not acc.count then return end
  prefix = prefix or ''
  for bucket = 1, #LATENESS_EDGES + 1 do
    if acc[bucket] then redis.call('HINCRBY', K_LATENESS, prefix .. 'b' .. bucket, acc[bucket]) end
  end
  redis.call('HINCRBY', K_LATENESS, prefix .. 'count', acc.count)
  redis.call('HINCRBY', K_LATENESS, prefix .. 'sum_us', fmt(acc.sum))
  local max = tonumber(redis.call('HGET', K_LATENESS, prefix .. 'max_us') or '0')
  if acc.max > max then redis.call('HSET', K_LATENESS, prefix .. 'max_us', fmt(acc.max)) end
end

-- The token bucket of flow control: core/flow_control.cc's Allowance refill, the same doubles
-- in the same order (RedisScripts.TheLuaTokenBucketIsTheCppOne compares them). `state` is
-- 'tokens|at_us' (K_COUNTERS '_tb') or nil (never used: full). Returns tokens, at_us.
local function token_refill(state, rate, burst, now)
  local tokens, at = burst, now
  if state then
    local t, a = string.match(state, '^([^|]+)|(-?%d+)$')
    tokens, at = tonumber(t), tonumber(a)
    if now > at then
      tokens = math.min(burst, tokens + (now - at) * rate / 1e6)
      at = now
    else
      tokens = math.min(burst, tokens)
    end
  end
  return tokens, at
end

-- When the next whole token is in the bucket: core/flow_control.cc's NextTokenUs.
local function next_token_us(tokens, at, rate)
  if tokens >= 1 then return at end
  return at + math.ceil((1 - tokens) * 1e6 / rate)
end

-- The back-off of a nack without retry_in_ms: core/backoff.cc's BackoffDelayMs, the same
-- arithmetic on the same doubles (`jitter` is policy.jitter * (2u - 1), drawn by the C++ side);
-- RedisStore.TheLuaBackOffIsTheCppOne compares the two over a grid of policies and attempts.
local function backoff_ms(attempt, base, factor, max_ms, jitter)
  local exp = attempt - 1
  if exp < 0 then exp = 0 end
  local delay = 0
  if base ~= 0 then delay = base * factor ^ exp end  -- 0 * inf would be NaN
  -- Not 'delay >= max_ms': NaN and infinity are capped too.
  if not (delay < max_ms) then delay = max_ms end  -- luacheck: ignore 581
  delay = delay * (1 + jitter)
  local rounded = math.floor(delay)  -- llround: half away from zero (delay >= 0)
  if delay - rounded >= 0.5 then rounded = rounded + 1 end
  if rounded > max_ms then rounded = max_ms end
  if rounded < 0 then rounded = 0 end
  return rounded
end

-- Deletes a completed job (kept by keep_completed_ms): cancel, the sweep.
local function remove_done(id)
  for _, hash in ipairs({ K_JOBS, K_ERRORS, K_DONEMETA, K_RESULTS }) do redis.call('HDEL', hash, id) end
  redis.call('ZREM', K_DONE, id)
end

-- The completed job ARGV[a] (an id) or ARGV[a + 1] (a key, while it is kept) names: its id and raw
-- meta, or nil.
local function resolve_done(a)
  local id = ARGV[a]
  if id == '' then
    local kid, _, expiry = kept_parse(redis.call('HGET', K_KEYS, ARGV[a + 1]))
    if not kid or expiry <= math.floor(now_us() / 1000) then return nil, nil end
    id = kid
  end
  local meta = redis.call('HGET', K_DONEMETA, id)
  if not meta then return nil, nil end
  return id, meta
end

-- A job addressed by id (ARGV[a]) or, when that is empty, by idempotency key (ARGV[a+1]).
local function resolve(a)
  local id = ARGV[a]
  if id == '' then
    id = redis.call('HGET', K_KEYS, ARGV[a + 1])
    if not id or kept_parse(id) then return nil, nil end  -- kept after its job was done: no job
  end
  return id, meta_get(id)
end
-- luacheck: pop
