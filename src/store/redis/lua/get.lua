-- ARGV: id, key. Returns {id, meta, body, last_error, lease_deadline|"", dead_at|"", now,
-- progress|""} or nil; a completed job's row has its completed_at and result|"" after them. The
-- meta is a format 1-3 one (a format 4 value's meta, its record the body).
local id = ARGV[1]
if id == '' then
  id = redis.call('HGET', K_KEYS, ARGV[2])
  if id and kept_parse(id) then id = nil end  -- kept after its job was done: that job, if completed
end
local function meta_and_body(jid, v)
  local meta, body = meta_split(v)
  return meta, body or redis.call('HGET', K_JOBS, jid) or ''
end
local raw = id and redis.call('HGET', K_META, id)
if not raw then
  local did, draw = resolve_done(1)
  if not did then return false end
  local dmeta, dbody = meta_and_body(did, draw)
  return { did, dmeta, dbody, redis.call('HGET', K_ERRORS, did) or '', '', '',
           math.floor(now_us() / 1000), '', redis.call('ZSCORE', K_DONE, did) or '0',
           redis.call('HGET', K_RESULTS, did) or '' }
end
local meta, body = meta_and_body(id, raw)
return { id, meta, body, redis.call('HGET', K_ERRORS, id) or '',
         redis.call('ZSCORE', K_LEASES, id) or '', redis.call('ZSCORE', K_DEAD, id) or '',
         math.floor(now_us() / 1000), redis.call('HGET', K_PROGRESS, id) or '' }
