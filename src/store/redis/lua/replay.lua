-- ARGV: limit, then ids (none: the oldest `limit` dead jobs). Returns how many were replayed.
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
      if key_holder(m.key, now) then  -- a live job, or a done job's kept key
        m.key, m.ki = '', '0'
      else
        redis.call('HSET', K_KEYS, m.key, id)
        redis.call('ZREM', K_KEPT, m.key)
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
