-- ARGV: force ('1'). Deletes every key of this shard of a queue; without force only when it
-- holds no job (every job, live or dead, has a meta entry; completed jobs kept do not count, and
-- go with it). Returns {deleted (0/1), jobs}.
local jobs = redis.call('HLEN', K_META)
if jobs > 0 and ARGV[1] ~= '1' then return {0, jobs} end
for _, g in ipairs(redis.call('ZRANGE', K_TURNS, 0, -1)) do redis.call('UNLINK', lane_key(g)) end
-- Its waits for an outcome end: their jobs are gone, as if cancelled.
for _, id in ipairs(redis.call('ZRANGE', K_WAITING, 0, -1)) do
  redis.call('PUBLISH', WAKE, 'outcome cancelled ' .. id)
end
redis.call('UNLINK', K_DUE, K_JOBS, K_META, K_READY, K_LEASES, K_DEAD, K_KEYS, K_ERRORS, K_COUNTERS,
  K_LATENESS, K_CONFIG, K_KEYTTL, K_KEPT, K_TURNS, K_LANED, K_PROGRESS, K_DONE, K_DONEMETA, K_RESULTS, K_WAITING)
return {1, jobs}
