-- Returns {scheduled, ready, reserved, dead, due_next_60s, earliest|-1, oldest_ready_ms, paused,
-- counters (flat), lateness (flat), now, lanes (flat: group, ready jobs in its lane; the first
-- 1000 groups by turn), completed}. Ready counts the stream's waiting entries and the lanes' jobs.
local now = math.floor(now_us() / 1000)
local scheduled = redis.call('ZCARD', K_DUE)
local reserved = redis.call('ZCARD', K_LEASES)
local dead = redis.call('ZCARD', K_DEAD)
local ready, oldest = 0, 0
if redis.call('EXISTS', K_READY) == 1 then
  -- Stream entries are waiting or reserved; leases with a priority or a group are not entries.
  ready = redis.call('XLEN', K_READY) - (reserved - tonumber(redis.call('HGET', K_COUNTERS, '_lres') or '0'))
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
local lanes = {}
for _, g in ipairs(redis.call('ZRANGE', K_TURNS, 0, 999)) do
  lanes[#lanes + 1] = g
  lanes[#lanes + 1] = redis.call('ZCARD', lane_key(g))
end
ready = ready + tonumber(redis.call('HGET', K_COUNTERS, '_lready') or '0')
local due60 = redis.call('ZCOUNT', K_DUE, '-inf', now + 60000)
return { scheduled, ready, reserved, dead, due60, earliest_due() or -1, oldest,
         redis.call('HGET', K_CONFIG, 'paused') == '1' and 1 or 0,
         redis.call('HGETALL', K_COUNTERS), redis.call('HGETALL', K_LATENESS), now, lanes,
         redis.call('ZCARD', K_DONE) }
