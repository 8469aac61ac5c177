-- ARGV: max_delay_ms, n, then n x (id, body, mode d|a|n, value, max_attempts, key, replace 0|1|2
-- (2: debounce), key_ttl_ms, priority, group)
-- Returns per job {id, due, duplicate, replaced}; errors "delayq:TOO_FAR:<i>:<now>" (a deliver_at
-- past max_delay_ms: the C++ side words it, with ResolveDue) and "delayq:CONFLICT:<i>:<id>",
-- before anything is written.
local max_delay, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = math.floor(now_us() / 1000)
local jobs, seen = {}, {}
for i = 1, n do
  local b = 2 + (i - 1) * 10
  local j = { id = ARGV[b + 1], body = ARGV[b + 2], mode = ARGV[b + 3], value = tonumber(ARGV[b + 4]),
              max = ARGV[b + 5], key = ARGV[b + 6], replace = ARGV[b + 7] ~= '0', debounce = ARGV[b + 7] == '2',
              ttl = tonumber(ARGV[b + 8]), prio = tonumber(ARGV[b + 9]), grp = ARGV[b + 10] }
  j.due = now
  if j.mode == 'd' then
    j.due = now + j.value
  elseif j.mode == 'a' then
    if j.value > now + max_delay then
      return redis.error_reply('delayq:TOO_FAR:' .. (i - 1) .. ':' .. fmt(now))
    end
    if j.value > now then j.due = j.value end
  end
  if j.key ~= '' then
    if seen[j.key] then
      j.dup_of = seen[j.key]
    else
      seen[j.key] = i
      local existing = redis.call('HGET', K_KEYS, j.key)
      local kept_id, kept_due, kept_expiry = kept_parse(existing)
      if kept_id then
        -- Done, and its key still kept: a duplicate of the finished job, even with replace (the
        -- C++ twin is EngineImpl::PlanEnqueueLocked). Once free, the new job overwrites it.
        if kept_expiry > now then j.kept = { kept_id, kept_due } end
        existing = nil
      end
      if existing then
        local m = meta_get(existing)
        if m then
          j.existing, j.meta = existing, m
          if j.replace and m.state == 'r' then
            return redis.error_reply('delayq:CONFLICT:' .. (i - 1) .. ':' .. existing)
          end
        end
      end
    end
  end
  jobs[i] = j
end
local earliest = earliest_due()
local min_new, any_ready, added, out = nil, false, 0, {}
-- Metas (each with its job's record: format 4; a record over RECORD_IN_META_MAX goes to K_JOBS)
-- and due entries go out as one variadic HSET / ZADD each: a batch costs two commands, not two
-- per job.
local metas, dues, bodies, unjobbed = {}, {}, {}, {}
for i = 1, n do
  local j = jobs[i]
  if j.dup_of then
    local o = out[j.dup_of]
    out[i] = { o[1], o[2], 1, 0 }
  elseif j.kept then
    out[i] = { j.kept[1], j.kept[2], 1, 0 }
  elseif j.existing and not j.replace then
    out[i] = { j.existing, j.meta.due, 1, 0 }
  else
    local id, m = j.existing or j.id, j.meta
    local in_jobs = m and not has_record(m)  -- its old record is in K_JOBS
    if m then
      -- A debounce never moves the job earlier (the C++ twin is EngineImpl::PlanEnqueueLocked).
      if j.debounce and m.due > j.due then j.due = m.due end
      if m.state == 's' then redis.call('ZREM', K_DUE, id) end
      leave_stream(m, id)
      -- Replaced: new content in the old job's place, so its attempts start again (the C++
      -- twin is EngineImpl::EnqueueImpl).
      m.delivery = '0'
      m.base, m.attempt = 0, 0
      if j.max ~= '' then m.max = tonumber(j.max) end
    else
      m = { due = 0, base = 0, attempt = 0, max = tonumber(j.max), delivery = '0', sid = '-',
            ki = (j.key ~= '' and '1' or '0'), key = j.key, prio = 0, grp = '' }
      if j.key ~= '' then
        redis.call('HSET', K_KEYS, j.key, id)
        redis.call('ZREM', K_KEPT, j.key)  -- it may have overwritten a kept key whose time ran out
      end
      added = added + 1
    end
    -- A new id has no key ttl to clear: only a replaced job may hold one (one call less per job).
    if j.ttl > 0 then
      redis.call('HSET', K_KEYTTL, id, j.ttl)
    elseif j.existing then
      redis.call('HDEL', K_KEYTTL, id)
    end
    if #j.body <= RECORD_IN_META_MAX then
      m.body = j.body
      if in_jobs then unjobbed[#unjobbed + 1] = id end
    else
      m.body, m.body_at, m.v = nil, nil, nil
      bodies[#bodies + 1] = id
      bodies[#bodies + 1] = j.body
    end
    m.due = j.due
    if laned(m) then redis.call('ZREM', K_LANED, id) end  -- a replaced job's old place in the listing
    m.prio, m.grp = j.prio, j.grp  -- (a replaced job's, after it left its old lane)
    if j.due <= now then
      if laned(m) then lane_add(id, m) else stream_add(id, m) end
      any_ready = true
    else
      m.state = 's'
      m.sid = '-'
      dues[#dues + 1] = j.due
      dues[#dues + 1] = id
      if not min_new or j.due < min_new then min_new = j.due end
    end
    metas[#metas + 1] = id
    metas[#metas + 1] = meta_str(m)
    laned_index(id, m)
    out[i] = { id, j.due, j.existing and 1 or 0, j.existing and 1 or 0 }
  end
end
if #metas > 0 then redis.call('HSET', K_META, unpack(metas)) end
if #bodies > 0 then redis.call('HSET', K_JOBS, unpack(bodies)) end
if #unjobbed > 0 then redis.call('HDEL', K_JOBS, unpack(unjobbed)) end
if #dues > 0 then redis.call('ZADD', K_DUE, unpack(dues)) end
if added > 0 then redis.call('HINCRBY', K_COUNTERS, 'enqueued', added) end
if min_new and (not earliest or min_new < earliest) then redis.call('PUBLISH', WAKE, 'due ' .. fmt(min_new)) end
if any_ready then redis.call('PUBLISH', WAKE, 'ready') end
return out
