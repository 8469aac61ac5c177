-- ARGV: limit. Moves due jobs to the stream. Returns {moved, next_due|-1, next_lease|-1, now,
-- first_dead|-1}.
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
if #ids > 0 then
  local found, parsed, metas = redis.call('HMGET', K_META, unpack(ids)), {}, {}
  for i = 1, #ids do parsed[i] = meta_parse(found[i]) or false end  -- all read before any write
  redis.call('ZREM', K_DUE, unpack(ids))
  for i, id in ipairs(ids) do
    local m = parsed[i]
    if m then
      m.delivery = '0'
      place(id, m, now)
      metas[#metas + 1] = id
      metas[#metas + 1] = meta_str(m)
      laned_index(id, m)
    end
  end
  if #metas > 0 then redis.call('HSET', K_META, unpack(metas)) end
  redis.call('PUBLISH', WAKE, 'ready')
end
local lease = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
return { #ids, earliest_due() or -1, lease[2] and tonumber(lease[2]) or -1, now, first_dead() or -1 }
