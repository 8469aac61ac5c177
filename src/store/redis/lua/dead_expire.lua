-- ARGV: retention_ms, limit. Deletes up to `limit` dead jobs that died retention_ms or more ago
-- (the embedded store's twin: EngineImpl::SweepDeadLocked). Returns {deleted, first_dead|-1, now}.
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_DEAD, '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  local m = meta_get(id)
  if m then remove_job(id, m) else redis.call('ZREM', K_DEAD, id) end
end
return { #ids, first_dead() or -1, now }
