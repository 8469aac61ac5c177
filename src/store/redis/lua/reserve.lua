-- ARGV: consumer, max, lease_ms, T, max_bytes, first_free (1|0), rate_per_s, burst (in force),
-- max_reserved, group_max_reserved (0: none; this shard's share of the queue's limits),
-- priority_aging_ms, then `max` delivery tokens.
-- Returns per delivery {id, body, attempt, token, due, lease_deadline, max_attempts, key}; when
-- flow control held ready jobs back, then one integer more: the Redis time (µs) of the next token,
-- 0 when only max_reserved held them.
--
-- The embedded store's steps (engine_delivery.cc), each a function below: the allowance of flow
-- control, then a plan (expired leases claimed first, then ready order when jobs have priorities
-- or groups, else due order), then the plan applied (leases, lateness) and the bucket taken from.
if redis.call('HGET', K_CONFIG, 'paused') == '1' then return {} end
if redis.call('EXISTS', K_READY) == 0 and not ordered() then return {} end
local consumer, max, lease, T = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local max_bytes, first_free = tonumber(ARGV[5]), ARGV[6] == '1'
local rate, burst, cap = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local group_cap, aging = tonumber(ARGV[10]), tonumber(ARGV[11])
local nowu = now_us()
local now = math.floor(nowu / 1000)

-- Leases of the default group (of this shard).
local function default_leased()
  return redis.call('ZCARD', K_LEASES) - tonumber(redis.call('HGET', K_COUNTERS, '_gres') or '0')
end

-- Flow control (core/flow_control.cc's Allowance): at most the whole tokens of the bucket
-- (K_COUNTERS '_tb') and the room under max_reserved (the leases of this shard). Returns the jobs
-- this reserve may take, and the bucket's tokens and time (nil without a rate).
local function allowance()
  local want, tokens, tb_at = max, nil, nil
  if rate > 0 then
    tokens, tb_at = token_refill(redis.call('HGET', K_COUNTERS, '_tb'), rate, burst, nowu)
    want = math.min(want, math.floor(tokens))
  end
  if cap > 0 then want = math.min(want, cap - redis.call('ZCARD', K_LEASES)) end
  -- All ready jobs in the default group (none has a priority or a group): its cap is one more limit.
  if group_cap > 0 and not ordered() then want = math.min(want, group_cap - default_leased()) end
  if want < 0 then want = 0 end
  return want, tokens, tb_at
end

local want, tokens, tb_at = allowance()
-- Since when a limit has held ready jobs back (as before this reserve: its lateness samples).
local limited_since = tonumber(redis.call('HGET', K_COUNTERS, '_limited_since') or '-1')
-- The plan: {stream entry id or 'L' (a lane), job id, deliveries it counts} per job taken.
local got = {}
local group_since = {}  -- per group served: since when (µs) its group_max_reserved held it, or -1

-- The answer stops before the job whose stored record would take it over max_bytes (answer_fits,
-- the embedded store's rule, on the same encoded records). Entries are peeked and sized before
-- they are taken from the stream.
-- Each job's meta value (format 4: with its record) is read once, a chunk at a time where the
-- plan reads ahead: its record's size for the cap, then its lease in apply(). Nothing writes a
-- meta before apply(), so what was read stays true.
local raw = {}  -- id -> meta value, false when there is none
local function prefetch(ids)
  local missing = {}
  for _, id in ipairs(ids) do
    if raw[id] == nil then missing[#missing + 1] = id end
  end
  if #missing == 0 then return end
  local values = redis.call('HMGET', K_META, unpack(missing))
  for i, id in ipairs(missing) do raw[id] = values[i] or false end
end
local function record_size(id)
  if raw[id] == nil then prefetch({ id }) end
  local v = raw[id]
  if not v then return 0 end  -- gone: apply() drops its entry
  local _, stop = meta_bounds(v)
  if stop then return #v - stop end
  return redis.call('HSTRLEN', K_JOBS, id)  -- its record in K_JOBS
end

local bytes, taken = 0, 0
local function fits(id)
  local n = record_size(id)
  if not answer_fits(bytes, n, max_bytes, first_free and taken == 0) then return false end
  bytes, taken = bytes + n, taken + 1
  return true
end
local function room() return #got < want and (taken == 0 or bytes < max_bytes) end

-- Deliveries whose lease ran out (idle > T) are claimed first; the pending list counts them.
-- Only scanned while the reaper has flagged run-out leases ('_claim'); the flag goes when one
-- scan from the start of the pending list reaches its end without filling the batch.
local function plan_claims()
  local cursor = redis.call('HGET', K_COUNTERS, '_claim_cursor') or '0-0'
  local n, whole = 0, true
  for _, p in ipairs(redis.call('XPENDING', K_READY, GROUP, 'IDLE', T, cursor, '+', want)) do
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
    if whole and cursor == '0-0' and claimed[1] == '0-0' and #claimed[2] < want then
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
  if ordered() then turn_check('') end  -- the claims may have been the default group's last ready jobs
end

-- Ready order (core/ready_order.h), read a chunk at a time. Each source of a group's ready jobs
-- is read into the script in chunks that double (2, 4, ... 64): its lane (one source per
-- priority level when priorities age, since a level's head is then what competes; else the whole
-- lane, which is priority-major), and for the default group the stream (priority 0). Picks are
-- made from the sources' heads, and what they change (lanes, the stream's consumer group, turns,
-- counts) is written once, by flush_ready_order. Nothing else runs during a script, so the chunks
-- stay true. The embedded twin is engine_delivery.cc's PlanReadyOrderLocked.
local function effective(p, due)
  if aging <= 0 or now <= due then return p end
  return math.min(9, p + math.floor((now - due) / aging))
end

local function lane_source(g, lo, hi)
  return { key = lane_key(g), lo = fmt(lo), hi = hi, buf = {}, pos = 1, read = 0, size = 2, done = false }
end
-- The head of a lane source, {id, prio, due, source = 'L'}; nil when it has no more.
local function lane_head(s)
  if s.pos <= #s.buf then return s.buf[s.pos] end
  if s.done then return nil end
  local r = redis.call('ZRANGEBYSCORE', s.key, s.lo, s.hi, 'WITHSCORES', 'LIMIT', s.read, s.size)
  s.buf, s.pos = {}, 1
  for i = 1, #r, 2 do
    local score = tonumber(r[i + 1])
    local p = 9 - math.floor(score / LEVEL)
    s.buf[#s.buf + 1] = { id = r[i], prio = p, due = score - (9 - p) * LEVEL, source = 'L' }
  end
  s.read, s.done, s.size = s.read + #s.buf, #s.buf < s.size, math.min(64, s.size * 2)
  local ids = {}
  for i, h in ipairs(s.buf) do ids[i] = h.id end
  prefetch(ids)
  return s.buf[1]
end

-- The default group's stream: entries past the consumer group's last delivered, with their due
-- times from their metas (one HMGET a chunk). An entry without a job id ends it, as before.
local stream = { buf = {}, pos = 1, after = nil, size = 2, done = false, taken = 0 }
local function stream_head()
  local s = stream
  if s.pos <= #s.buf then return s.buf[s.pos] end
  if s.done then return nil end
  if not s.after then
    if redis.call('EXISTS', K_READY) == 0 then s.done = true return nil end
    s.after = last_delivered()
  end
  local r = redis.call('XRANGE', K_READY, '(' .. s.after, '+', 'COUNT', s.size)
  s.buf, s.pos = {}, 1
  local ids = {}
  for _, e in ipairs(r) do
    if not (e[2] and e[2][2]) then break end
    ids[#ids + 1] = e[2][2]
    s.buf[#s.buf + 1] = { id = e[2][2], prio = 0, source = e[1] }
  end
  s.done = #s.buf < s.size
  s.size = math.min(64, s.size * 2)
  if #ids == 0 then return nil end
  s.after = s.buf[#s.buf].source
  prefetch(ids)
  for _, h in ipairs(s.buf) do
    local m = meta_parse(raw[h.id] or nil)
    h.due = m and m.due or now
  end
  return s.buf[1]
end

-- A group's sources, made on first use. Without aging, its whole lane. With aging, one source
-- per non-empty level, found by reading on from the level after the last one found (so an empty
-- level costs nothing: a group with jobs at one priority costs two reads, not ten). A read that
-- spans levels seeds each level it saw; all but its last level are then read whole.
local sources = {}
local function level_sources(g)
  local list, lo, page = {}, 0, 2
  while true do
    local r = redis.call('ZRANGEBYSCORE', lane_key(g), fmt(lo), '+inf', 'WITHSCORES', 'LIMIT', 0, page)
    local s
    for i = 1, #r, 2 do
      local score = tonumber(r[i + 1])
      local p = 9 - math.floor(score / LEVEL)
      local level_lo = (9 - p) * LEVEL
      if not s or s.lo ~= fmt(level_lo) then
        if s then s.done = true end
        s = lane_source(g, level_lo, '(' .. fmt(level_lo + LEVEL))
        list[#list + 1] = s
        lo = level_lo + LEVEL
      end
      s.buf[#s.buf + 1] = { id = r[i], prio = p, due = score - (9 - p) * LEVEL, source = 'L' }
      s.read = s.read + 1
    end
    if #r < 2 * page then
      if s then s.done = true end
      return list
    end
  end
end
local function sources_of(g)
  if not sources[g] then sources[g] = aging > 0 and level_sources(g) or { lane_source(g, 0, '+inf') } end
  return sources[g]
end

-- The best job of group g by effective priority, then due, then id, with the source it heads
-- (nil: the stream); nil when the group has none.
local function best_of_group(g)
  local best, best_source, best_eff
  local function consider(h, source)
    local eff = effective(h.prio, h.due)
    local better = not best or eff > best_eff or
      (eff == best_eff and (h.due < best.due or (h.due == best.due and h.id < best.id)))
    if better then
      best, best_source, best_eff = h, source, eff
    end
  end
  for _, s in ipairs(sources_of(g)) do
    local h = lane_head(s)
    if h then consider(h, s) end
  end
  if g == '' then
    local h = stream_head()
    if h then consider(h, nil) end
  end
  if best then return { id = best.id, source = best.source, from = best_source } end
  return nil
end

-- Whether group g has another ready job after the picks so far (claimable deliveries count for
-- the default group, as in turn_check).
local claimable = nil
local function has_more(g)
  for _, s in ipairs(sources_of(g)) do
    if lane_head(s) then return true end
  end
  if g ~= '' then return false end
  if stream_head() then return true end
  if claimable == nil then claimable = redis.call('HGET', K_COUNTERS, '_claim') ~= false end
  return claimable
end

-- Takes the picked job (in the script; flush_ready_order writes it).
local lane_taken, lanes_left, turn = {}, nil, nil
local function take(pick)
  got[#got + 1] = { pick.source, pick.id, 1 }
  if pick.from then
    pick.from.pos = pick.from.pos + 1
    local g = pick.g
    lane_taken[g] = lane_taken[g] or {}
    lane_taken[g][#lane_taken[g] + 1] = pick.id
    lanes_left = lanes_left - 1
  else
    stream.pos = stream.pos + 1
    stream.taken = stream.taken + 1
  end
end

-- Writes what the picks changed: the stream entries taken are read into the consumer group, the
-- lane entries removed, the counts lowered, and the turns of the groups served moved (or removed
-- when a group has no ready job left; all turns go with the last laned ready job).
local function flush_ready_order(turns)
  if stream.taken > 0 then
    redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', stream.taken, 'STREAMS', K_READY, '>')
  end
  local removed = 0
  for g, ids in pairs(lane_taken) do removed = removed + redis.call('ZREM', lane_key(g), unpack(ids)) end
  if lanes_left <= 0 or (removed > 0 and redis.call('HINCRBY', K_COUNTERS, '_lready', -removed) <= 0) then
    redis.call('HDEL', K_COUNTERS, '_lready')
    redis.call('DEL', K_TURNS)
    ordering = false
    return
  end
  if turn then redis.call('HSET', K_COUNTERS, '_turn', fmt(turn)) end
  local moved, ended = {}, {}
  for g, t in pairs(turns) do
    if t == false then
      ended[#ended + 1] = g
    else
      moved[#moved + 1] = fmt(t)
      moved[#moved + 1] = g
    end
  end
  if #moved > 0 then redis.call('ZADD', K_TURNS, unpack(moved)) end
  if #ended > 0 then redis.call('ZREM', K_TURNS, unpack(ended)) end
end

-- The turns in order, read as far as the picks need: `front`, the groups of K_TURNS from its
-- start in chunks (a queue of 1 000 tenants costs a reserve of 10 jobs a few of them), then
-- `back`, the groups this reserve served that have more (their new turns; K_TURNS is written at
-- flush, so a later chunk can hold one again: `seen` skips it).
local turns_read, turns_done, seen = 0, false, {}
local function read_turns(front)
  if turns_done then return false end
  local size = math.max(8, want - #got)
  local r = redis.call('ZRANGE', K_TURNS, turns_read, turns_read + size - 1)
  turns_read, turns_done = turns_read + #r, #r < size
  for _, g in ipairs(r) do
    if not seen[g] then
      seen[g] = true
      front[#front + 1] = g
    end
  end
  return #r > 0
end

-- The next pick: the best job of the first group in turn order that is not full and has one.
local function next_pick(front, back, full)
  local function try(list, i)
    local g = list[i]
    if full(g) then return nil end
    local pick = best_of_group(g)
    if pick then pick.list, pick.gi, pick.g = list, i, g end
    return pick
  end
  local i = 1
  while i <= #front or read_turns(front) do
    if i <= #front then
      local pick = try(front, i)
      if pick then return pick end
      i = i + 1
    end
  end
  for j = 1, #back do
    local pick = try(back, j)
    if pick then return pick end
  end
  return nil
end

-- Lanes: one job at a time from the group with the oldest turn that is not at group_max_reserved
-- (counting what this reserve takes); each pick ends its group's turn.
local function plan_ready_order()
  lanes_left = tonumber(redis.call('HGET', K_COUNTERS, '_lready') or '0')
  local taking, leased, turns, front, back, served, reheld = {}, {}, {}, {}, {}, {}, {}
  -- Deliveries claimed back (plan_claims) are the default group's, and count toward its cap.
  local claims = #got
  local function leased_of(g)
    if leased[g] == nil then
      leased[g] = g == '' and default_leased() or tonumber(redis.call('HGET', K_COUNTERS, 'gr:' .. g) or '0')
    end
    return leased[g] + (taking[g] or 0) + (g == '' and claims or 0)
  end
  local function full(g)
    if group_cap <= 0 then return false end
    local at_cap = leased_of(g) >= group_cap
    -- A group at its cap with ready jobs is held back by a limit from now on (its jobs' wait is
    -- limit_wait, not lateness: the embedded store's rule, FlowState::GroupHeld). One served by
    -- this reserve is held again after its served time goes (below).
    if at_cap then
      redis.call('HSETNX', K_COUNTERS, '_gls:' .. g, fmt(nowu))
      if taking[g] then reheld[g] = true end
    end
    return at_cap
  end
  -- Once no laned job is ready (taken by this reserve, or none: turns left without one), the rest
  -- comes in due order from the default group alone, under its cap as allowance() puts it on a
  -- reserve that starts unordered.
  local function unordered_rest()
    if group_cap > 0 then want = math.min(want, #got + math.max(0, group_cap - leased_of(''))) end
  end
  if lanes_left <= 0 then
    flush_ready_order({})
    unordered_rest()
    return
  end
  while #got < want and lanes_left > 0 do
    local pick = next_pick(front, back, full)
    if not pick or not fits(pick.id) then break end
    take(pick)
    if not taking[pick.g] then served[#served + 1] = '_gls:' .. pick.g end
    taking[pick.g] = (taking[pick.g] or 0) + 1
    -- The group's turn is over: to the back while it has ready jobs.
    table.remove(pick.list, pick.gi)
    if has_more(pick.g) then
      turn = (turn or tonumber(redis.call('HGET', K_COUNTERS, '_turn') or '0')) + 1
      turns[pick.g] = turn
      back[#back + 1] = pick.g
    else
      turns[pick.g] = false
    end
  end
  -- The groups served: since when their caps held them back goes with the jobs taken from them.
  if #served > 0 then
    for i, since in ipairs(redis.call('HMGET', K_COUNTERS, unpack(served))) do
      group_since[string.sub(served[i], 6)] = tonumber(since or '-1')
    end
    redis.call('HDEL', K_COUNTERS, unpack(served))
  end
  local held_again = {}
  for g in pairs(reheld) do
    held_again[#held_again + 1] = '_gls:' .. g
    held_again[#held_again + 1] = fmt(nowu)
  end
  if #held_again > 0 then redis.call('HSET', K_COUNTERS, unpack(held_again)) end
  flush_ready_order(turns)
  if not ordered() then unordered_rest() end
end

-- Due order: the stream's next entries, as many as fit.
local function plan_due_order()
  local n = 0
  local entries = redis.call('XRANGE', K_READY, '(' .. last_delivered(), '+', 'COUNT', want - #got)
  -- The metas are read a chunk at a time (8, 16, 32, 64), so an answer bounded by max_bytes
  -- never reads far past it.
  local chunk, read = 8, 0
  for i, e in ipairs(entries) do
    if i > read then
      local ids = {}
      for k = i, math.min(#entries, i + chunk - 1) do
        local f = entries[k][2]
        if f and f[2] then ids[#ids + 1] = f[2] end
      end
      prefetch(ids)
      read, chunk = i + chunk - 1, math.min(64, chunk * 2)
    end
    if e[2] and e[2][2] and not fits(e[2][2]) then break end
    n = n + 1
  end
  if n == 0 then return end
  local r = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', n, 'STREAMS', K_READY, '>')
  if not r then return end
  for _, e in ipairs(r[1][2]) do
    if e[2] and e[2][2] then got[#got + 1] = { e[1], e[2][2], 1 } end
  end
end

-- Whether a limit kept ready jobs from this reserve: it allowed fewer than asked and more are
-- ready (new entries past those taken, or claimable ones). It holds them back from the first
-- reserve it did so (limited_since) until one it does not.
local function note_held()
  local held = want < max and (redis.call('HGET', K_COUNTERS, '_claim') ~= false or stream_next() ~= nil or
    tonumber(redis.call('HGET', K_COUNTERS, '_lready') or '0') > 0)
  if held then
    if limited_since < 0 then redis.call('HSET', K_COUNTERS, '_limited_since', fmt(nowu)) end
  elseif limited_since >= 0 then
    redis.call('HDEL', K_COUNTERS, '_limited_since')
  end
  return held
end

-- The plan applied: each job taken is leased (or goes dead when the claim was its last attempt,
-- or is dropped when its entry is stale), and a first delivery's lateness is recorded. The metas
-- (with the records) as the plan read them, one HSET and one ZADD, whatever the batch size.
local function apply()
  local ids = {}
  for i, g in ipairs(got) do ids[i] = g[2] end
  prefetch(ids)
  local out, token_at, acc, wait_acc = {}, 12, {}, {}
  local stale, metas, leases, tally, laned_ids = {}, {}, {}, lane_tally_new(), {}
  local in_jobs, at = {}, {}  -- the records kept in K_JOBS: one HMGET for them all
  for _, g in ipairs(got) do
    local sid, id, count = g[1], g[2], g[3]
    local m = meta_parse(raw[id] or nil)
    if not m or m.sid ~= sid then
      if sid ~= 'L' then stale[#stale + 1] = sid end  -- an entry its job no longer owns
    elseif m.base + count > m.max then
      go_dead(id, m, now, 'lease expired without an ack on attempt ' .. fmt(m.attempt) .. ' of ' .. fmt(m.max))
    else
      local token = ARGV[token_at]
      token_at = token_at + 1
      if m.state == 'q' and m.delivery == '0' then
        local since = limited_since
        local gs = group_since[m.grp or ''] or -1
        if gs >= 0 and (since < 0 or gs < since) then since = gs end
        local late, wait = lateness_split(m.due * 1000, since, nowu)
        lateness_add(acc, late)
        if wait >= 0 then lateness_add(wait_acc, wait) end
      end
      m.state = 'r'
      m.attempt = m.base + count
      m.delivery = token
      if laned(m) then  -- leased by its meta and the leases set, not the stream
        m.sid = '-'
        m.base = m.attempt
        lane_tally_lease(tally, m)
        laned_ids[#laned_ids + 1] = m.due  -- laned_index: a reserved job stays listed by due time
        laned_ids[#laned_ids + 1] = id
      end
      metas[#metas + 1] = id
      metas[#metas + 1] = meta_str(m)
      leases[#leases + 1] = now + lease
      leases[#leases + 1] = id
      local body = has_record(m) and body_of(id, m)
      out[#out + 1] = { id, body, m.attempt, token, m.due, now + lease, m.max, m.key }
      if not has_record(m) then
        in_jobs[#in_jobs + 1] = id
        at[#at + 1] = #out
      end
    end
  end
  drop_entries(stale)
  lane_tally_flush(tally)
  if #laned_ids > 0 then redis.call('ZADD', K_LANED, unpack(laned_ids)) end
  if #out > 0 then
    redis.call('HSET', K_META, unpack(metas))
    redis.call('ZADD', K_LEASES, unpack(leases))
  end
  if #in_jobs > 0 then
    for i, body in ipairs(redis.call('HMGET', K_JOBS, unpack(in_jobs))) do out[at[i]][2] = body or '' end
  end
  lateness_flush(acc)
  lateness_flush(wait_acc, 'w')
  return out
end

if redis.call('HGET', K_COUNTERS, '_claim') and want > 0 and redis.call('EXISTS', K_READY) == 1 then plan_claims() end
if ordered() and room() then plan_ready_order() end
if not ordered() and room() and redis.call('EXISTS', K_READY) == 1 then plan_due_order() end
local held = note_held()
local out = apply()
if #out > 0 then redis.call('HINCRBY', K_COUNTERS, 'delivered', #out) end
if rate > 0 then
  tokens = tokens - #out
  redis.call('HSET', K_COUNTERS, '_tb', string.format('%.17g|%d', tokens, tb_at))
end
if held then out[#out + 1] = (rate > 0 and tokens < 1) and next_token_us(tokens, tb_at, rate) or 0 end
return out
