-- ARGV: n, then n x (id, token), then 1|0: announce the leases that ended ('ready' on the wake
-- channel: reserves held back by max_reserved may go on), then keep_completed_ms and, when a
-- result may be kept, n results ('' for none): with keep_completed_ms above 0, or for a job
-- someone waits for (K_WAITING), the acked job is kept completed (K_DONE, K_DONEMETA, K_RESULTS)
-- rather than deleted, and a waited one's outcome announced. Returns per receipt "O" (acked), "N"
-- (no such job) or "E:<state>:<attempt>" (the delivery is over), then, when a job was kept, the
-- completion time.
local n = tonumber(ARGV[1])
if n == 0 then return {} end
local keep = tonumber(ARGV[2 * n + 3] or '0') > 0
local kept = {}     -- {id, completed meta, result} of each acked job kept
local deleted = {}  -- the acked jobs not kept
local legacy = {}   -- those of them whose record is in K_JOBS (a meta older than format 4)
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i] end
local found = redis.call('HMGET', K_META, unpack(ids))
local out, acked, done, sids, gone, tally, laned_gone = {}, 0, {}, {}, {}, lane_tally_new(), {}
local now
for i = 1, n do
  local id, token = ids[i], ARGV[2 * i + 1]
  local m = meta_parse(found[i])
  if not m or done[id] then
    out[i] = 'N'
  elseif m.state == 'd' or m.state == 's' or m.delivery ~= token then
    out[i] = 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max)
  else
    -- A job with a live delivery is in the stream and the lease set, never the due or dead set.
    done[id] = true
    if m.sid == 'L' then
      lane_remove(id, m)  -- its lease had run out, and it waited in its lane
    elseif m.sid ~= '-' then
      sids[#sids + 1] = m.sid
    end
    lane_tally_unlease(tally, m)
    if laned(m) then laned_gone[#laned_gone + 1] = id end
    now = now or math.floor(now_us() / 1000)
    release_key(id, m, now)
    gone[#gone + 1] = id
    if keep or waited(id) then
      m.state, m.sid, m.delivery = 'c', '-', '0'
      kept[#kept + 1] = { id, meta_str(m), ARGV[2 * n + 3 + i] or '' }
    else
      deleted[#deleted + 1] = id
      if not has_record(m) then legacy[#legacy + 1] = id end
    end
    acked = acked + 1
    out[i] = 'O'
  end
end
drop_entries(sids)
lane_tally_flush(tally)
if #laned_gone > 0 then redis.call('ZREM', K_LANED, unpack(laned_gone)) end
if #gone > 0 then
  for _, k in ipairs(kept) do
    redis.call('HSET', K_DONEMETA, k[1], k[2])
    redis.call('ZADD', K_DONE, now, k[1])
    if k[3] ~= '' then redis.call('HSET', K_RESULTS, k[1], k[3]) end
  end
  if #deleted > 0 then
    if #legacy > 0 then redis.call('HDEL', K_JOBS, unpack(legacy)) end
    redis.call('HDEL', K_ERRORS, unpack(deleted))
  end
  redis.call('HDEL', K_META, unpack(gone))
  redis.call('HDEL', K_KEYTTL, unpack(gone))
  if redis.call('EXISTS', K_PROGRESS) == 1 then redis.call('HDEL', K_PROGRESS, unpack(gone)) end
  redis.call('ZREM', K_LEASES, unpack(gone))
end
if acked > 0 then redis.call('HINCRBY', K_COUNTERS, 'acked', acked) end
if acked > 0 and ARGV[2 * n + 2] == '1' then redis.call('PUBLISH', WAKE, 'ready') end
for _, k in ipairs(kept) do announce_outcome(k[1], 'completed') end  -- after the writes: the reader finds it
if #kept > 0 then out[n + 1] = fmt(now) end  -- the completion time: the sweep is planned from it
return out
