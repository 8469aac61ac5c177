-- ARGV: want ('s' scheduled, 'q' ready, 'r' reserved, 'd' dead, 'c' completed), after_ms ('' = from the start),
-- after_tail (a job id for s/d; for q/r a stream sequence, or 'L' and a job id in the second
-- part), inclusive ('1': (after_ms, after_tail) itself is wanted too), limit, budget (entries to
-- read at most), max_bytes.
-- Returns {done, last_ms, last_tail, rows}: done 1 when nothing is left after the last position
-- read, and each row {pos_ms, pos_tail, {the get script's row}}. Scheduled and dead jobs come in
-- (score, id) order from their sorted sets. Ready and reserved ones come in two parts: first those
-- in the stream, in stream order (the order they became ready; reserved ones in the order of the
-- pending list, the same), then those with a priority or a group, which wait in lanes or hold
-- leases outside the stream, by (due, id) from K_LANED, their positions 'L' .. id.
local want, after_ms, after_tail = ARGV[1], ARGV[2], ARGV[3]
local inclusive = ARGV[4] == '1'
local limit, budget, max_bytes = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now = math.floor(now_us() / 1000)
local rows, bytes = {}, 0
local last_ms, last_tail = after_ms, after_tail
local function row(id, raw)
  local meta, body = meta_split(raw)  -- a format 4 value holds the record
  body = body or redis.call('HGET', K_JOBS, id) or ''
  bytes = bytes + #body
  return { id, meta, body, redis.call('HGET', K_ERRORS, id) or '', redis.call('ZSCORE', K_LEASES, id) or '',
           redis.call('ZSCORE', K_DEAD, id) or '', now, redis.call('HGET', K_PROGRESS, id) or '' }
end
local function full() return #rows >= limit or bytes >= max_bytes end
local CHUNK = 200

-- One sorted set, (score, member) from the cursor on: each member `keep` returns a meta for is a
-- row at (score, tail .. member). Returns true when the set was read to its end.
local scanned = 0  -- entries read, against the budget
local function zset_page(key, from_ms, from_id, tail, keep)
  local function take(list)
    for i = 1, #list, 2 do
      local id, score = list[i], list[i + 1]
      local meta = keep(id)
      scanned = scanned + 1
      if meta then rows[#rows + 1] = { score, tail .. id, row(id, meta) } end
      last_ms, last_tail = score, tail .. id
      if full() or scanned >= budget then return false end
    end
    return true
  end
  local start = 0
  if from_ms ~= '' then
    -- Where the cursor's job stands when it is still there with that score; else skip the
    -- members of the same score up to it.
    local score = redis.call('ZSCORE', key, from_id)
    if score and tonumber(score) == tonumber(from_ms) then
      start = redis.call('ZRANK', key, from_id) + 1
    else
      local off = 0
      while true do
        local same = redis.call('ZRANGE', key, from_ms, from_ms, 'BYSCORE', 'LIMIT', off, CHUNK, 'WITHSCORES')
        local later = {}
        for i = 1, #same, 2 do
          if same[i] > from_id then
            later[#later + 1] = same[i]
            later[#later + 1] = same[i + 1]
          end
        end
        if not take(later) then return false end
        if #same < 2 * CHUNK then break end
        off = off + CHUNK
      end
      start = redis.call('ZCOUNT', key, '-inf', from_ms)
    end
  end
  while true do
    local list = redis.call('ZRANGE', key, start, start + CHUNK - 1, 'WITHSCORES')
    -- A full page may have taken the last member: the page after it is then empty.
    if not take(list) then return false end
    if #list < 2 * CHUNK then return true end
    start = start + CHUNK
  end
end

if want == 'c' then  -- completed jobs kept: their rows as the get script gives them, with the result
  local results = {}
  local done = zset_page(K_DONE, after_ms, after_tail, '', function(id)
    local meta = redis.call('HGET', K_DONEMETA, id)
    if meta then
      results[id] = redis.call('HGET', K_RESULTS, id) or ''
      bytes = bytes + #results[id]  -- a page's bound counts results too
    end
    return meta
  end)
  for _, r in ipairs(rows) do
    local job = r[3]
    job[9] = r[1]
    job[10] = results[job[1]]
  end
  return { done and 1 or 0, last_ms, last_tail, rows }
end

if want == 's' or want == 'd' then
  local key = K_DUE
  if want == 'd' then key = K_DEAD end
  local done = zset_page(key, after_ms, after_tail, '', function(id) return redis.call('HGET', K_META, id) end)
  return { done and 1 or 0, last_ms, last_tail, rows }
end

-- Ready and reserved, first part: the stream (the pending list for reserved).
local function split(eid)
  local ms, seq = string.match(eid, '^(%d+)%-(%d+)$')
  return ms, seq
end
local function state_of(m, eid)
  if not m or m.sid ~= eid then return nil end
  if m.state == 'q' then return 'q' end
  if m.state == 'r' then
    local lease = redis.call('ZSCORE', K_LEASES, m.id)
    if lease and tonumber(lease) > now then return 'r' end
    return 'q'
  end
  return nil
end
local function meta_of(id)
  local m = meta_get(id)
  if m then m.id = id end
  return m
end
-- Second part: the jobs with a priority or a group, by (due, id).
local function lanes_from(from_ms, from_id)
  local done = zset_page(K_LANED, from_ms, from_id, 'L', function(id)
    local m = meta_of(id)
    if m and (m.sid == 'L' or m.sid == '-') and state_of(m, m.sid) == want then
      return redis.call('HGET', K_META, id)
    end
    return nil
  end)
  return { done and 1 or 0, last_ms, last_tail, rows }
end
if string.sub(after_tail, 1, 1) == 'L' then return lanes_from(after_ms, string.sub(after_tail, 2)) end
-- A shard that never had a ready job has no stream (nor its group, which XPENDING needs).
if redis.call('EXISTS', K_READY) == 0 then return lanes_from('', '') end
local start = '-'
if after_ms ~= '' then
  start = after_ms .. '-' .. after_tail
  if not inclusive then start = '(' .. start end
end
while true do
  local entries = {}
  local n = math.min(CHUNK, budget - scanned)
  if want == 'r' then
    for _, p in ipairs(redis.call('XPENDING', K_READY, GROUP, start, '+', n)) do
      local e = redis.call('XRANGE', K_READY, p[1], p[1])
      entries[#entries + 1] = e[1] or { p[1], {} }
    end
  else
    entries = redis.call('XRANGE', K_READY, start, '+', 'COUNT', n)
  end
  for _, e in ipairs(entries) do
    scanned = scanned + 1
    local id = e[2][2]
    last_ms, last_tail = split(e[1])
    if id then
      if state_of(meta_of(id), e[1]) == want then
        rows[#rows + 1] = { last_ms, last_tail, row(id, redis.call('HGET', K_META, id)) }
        if full() then return { 0, last_ms, last_tail, rows } end
      end
    end
  end
  if #entries < n then return lanes_from('', '') end
  if scanned >= budget then return { 0, last_ms, last_tail, rows } end
  start = '(' .. entries[#entries][1]
end
