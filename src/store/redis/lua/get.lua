-- ARGV: id, key. Returns {id, meta, body, last_error, lease_deadline|"", dead_at|"", now,
-- progress|""} or nil.
local id = ARGV[1]
if id == '' then
  id = redis.call('HGET', K_KEYS, ARGV[2])
  if not id or kept_parse(id) then return false end
end
local meta = redis.call('HGET', K_META, id)
if not meta then return false end
return { id, meta, redis.call('HGET', K_JOBS, id) or '', redis.call('HGET', K_ERRORS, id) or '',
         redis.call('ZSCORE', K_LEASES, id) or '', redis.call('ZSCORE', K_DEAD, id) or '',
         math.floor(now_us() / 1000), redis.call('HGET', K_PROGRESS, id) or '' }
