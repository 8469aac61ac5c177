-- ARGV: id, key. Returns {id, meta, body, last_error, lease_deadline|"", dead_at|"", now,
-- progress|""} or nil; a completed job's row has its completed_at and result|"" after them.
local id = ARGV[1]
if id == '' then
  id = redis.call('HGET', K_KEYS, ARGV[2])
  if id and kept_parse(id) then id = nil end  -- kept after its job was done: that job, if completed
end
local meta = id and redis.call('HGET', K_META, id)
if not meta then
  local did, dmeta = resolve_done(1)
  if not did then return false end
  return { did, dmeta, redis.call('HGET', K_JOBS, did) or '', redis.call('HGET', K_ERRORS, did) or '', '', '',
           math.floor(now_us() / 1000), '', redis.call('ZSCORE', K_DONE, did) or '0',
           redis.call('HGET', K_RESULTS, did) or '' }
end
return { id, meta, redis.call('HGET', K_JOBS, id) or '', redis.call('HGET', K_ERRORS, id) or '',
         redis.call('ZSCORE', K_LEASES, id) or '', redis.call('ZSCORE', K_DEAD, id) or '',
         math.floor(now_us() / 1000), redis.call('HGET', K_PROGRESS, id) or '' }
