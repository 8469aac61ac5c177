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
local bytes, taken = 0, 0
local function fits(id)
  local n = redis.call('HSTRLEN', K_JOBS, id)
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

-- Ready order (core/ready_order.h): the best job of group g, by effective priority (aged), then
-- due, then id, among its levels' heads and, for the default group, the stream's next entry
-- (priority 0). nil when it has none.
local function effective(p, due)
  if aging <= 0 or now <= due then return p end
  return math.min(9, p + math.floor((now - due) / aging))
end
local function best_of_group(g)
  local best
  local function consider(eff, due, id, source)
    if not best or eff > best.eff or (eff == best.eff and (due < best.due or (due == best.due and id < best.id))) then
      best = { eff = eff, due = due, id = id, source = source }
    end
  end
  for p = 9, 1, -1 do
    local lo = (9 - p) * LEVEL
    local h = redis.call('ZRANGEBYSCORE', lane_key(g), fmt(lo), '(' .. fmt(lo + LEVEL), 'WITHSCORES', 'LIMIT', 0, 1)
    if h[1] then
      local due = tonumber(h[2]) - lo
      consider(effective(p, due), due, h[1], 'L')
    end
  end
  if g == '' then
    local e = stream_next()
    if e and e[2] and e[2][2] then
      local sm = meta_get(e[2][2])
      local due = sm and sm.due or now
      consider(effective(0, due), due, e[2][2], e[1])
    end
  else
    local lo = 9 * LEVEL  -- priority 0 of a named group
    local h = redis.call('ZRANGEBYSCORE', lane_key(g), fmt(lo), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if h[1] then
      local due = tonumber(h[2]) - lo
      consider(effective(0, due), due, h[1], 'L')
    end
  end
  return best
end

-- Takes the picked job: out of its lane, or from the stream. False when the stream had none.
local function take(pick)
  if pick.source == 'L' then
    local lm = meta_get(pick.id)
    if lm then lane_remove(pick.id, lm) end
    got[#got + 1] = { 'L', pick.id, 1 }
    return true
  end
  local r = redis.call('XREADGROUP', 'GROUP', GROUP, consumer, 'COUNT', 1, 'STREAMS', K_READY, '>')
  local e = r and r[1][2][1]
  if not e or not e[2] or not e[2][2] then return false end
  got[#got + 1] = { e[1], e[2][2], 1 }
  turn_check('')
  return true
end

-- Lanes: one job at a time from the group with the oldest turn that is not at group_max_reserved
-- (counting what this reserve takes); each pick ends its group's turn.
local function plan_ready_order()
  local groups = redis.call('ZRANGE', K_TURNS, 0, -1)
  local taking = {}
  local function full(g)
    if group_cap <= 0 then return false end
    local leased = g == '' and default_leased() or tonumber(redis.call('HGET', K_COUNTERS, 'gr:' .. g) or '0')
    local at_cap = leased + (taking[g] or 0) >= group_cap
    -- A group at its cap with ready jobs is held back by a limit from now on (its jobs' wait is
    -- limit_wait, not lateness: the embedded store's rule, FlowState::GroupHeld).
    if at_cap then redis.call('HSETNX', K_COUNTERS, '_gls:' .. g, fmt(nowu)) end
    return at_cap
  end
  while #got < want and ordered() do
    local pick
    for gi, g in ipairs(groups) do
      if not full(g) then
        pick = best_of_group(g)
        if pick then
          pick.gi, pick.g = gi, g
          break
        end
      end
    end
    if not pick or not fits(pick.id) or not take(pick) then break end
    -- The group is served: since when its cap held it back goes with the jobs taken from it.
    if group_since[pick.g] == nil then
      group_since[pick.g] = tonumber(redis.call('HGET', K_COUNTERS, '_gls:' .. pick.g) or '-1')
      redis.call('HDEL', K_COUNTERS, '_gls:' .. pick.g)
    end
    taking[pick.g] = (taking[pick.g] or 0) + 1
    -- The group's turn is over: to the back while it has ready jobs.
    table.remove(groups, pick.gi)
    if ordered() and redis.call('ZSCORE', K_TURNS, pick.g) then
      redis.call('ZADD', K_TURNS, redis.call('HINCRBY', K_COUNTERS, '_turn', 1), pick.g)
      groups[#groups + 1] = pick.g
    end
  end
end

-- Due order: the stream's next entries, as many as fit.
local function plan_due_order()
  local n = 0
  for _, e in ipairs(redis.call('XRANGE', K_READY, '(' .. last_delivered(), '+', 'COUNT', want - #got)) do
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
-- or is dropped when its entry is stale), and a first delivery's lateness is recorded. One HMGET
-- for the metas, one HSET, one ZADD and one HMGET for the bodies, whatever the batch size.
local function apply()
  local ids = {}
  for i, g in ipairs(got) do ids[i] = g[2] end
  local found = #ids > 0 and redis.call('HMGET', K_META, unpack(ids)) or {}
  local out, token_at, acc, wait_acc = {}, 12, {}, {}
  local stale, metas, leases, body_ids = {}, {}, {}, {}
  for i, g in ipairs(got) do
    local sid, id, count = g[1], g[2], g[3]
    local m = meta_parse(found[i])
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
        lane_lease(m)
        laned_index(id, m)
      end
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
