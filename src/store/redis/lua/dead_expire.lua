-- ARGV: retention_ms, limit, keep_completed_ms. Deletes up to `limit` dead jobs that died
-- retention_ms or more ago, and up to `limit` completed jobs acked keep_completed_ms or more ago
-- (the embedded store's twins: EngineImpl::SweepDeadLocked, SweepCompletedLocked). Returns
-- {deleted, first_dead|-1, now, first_completed|-1}.
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_DEAD, '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  local m = meta_get(id)
  if m then remove_job(id, m) else redis.call('ZREM', K_DEAD, id) end
end
local done = redis.call('ZRANGEBYSCORE', K_DONE, '-inf', now - tonumber(ARGV[3] or '0'), 'LIMIT', 0,
  tonumber(ARGV[2]))
for _, id in ipairs(done) do remove_done(id) end
return { #ids + #done, first_dead() or -1, now, first_done() or -1 }
