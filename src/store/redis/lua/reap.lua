-- ARGV: T, limit. Handles leases that ran out (the leases set holds each deadline): the last
-- attempt goes dead; others get idle time T, which makes XAUTOCLAIM in the next reserve claim
-- them, and the '_claim' flag tells reserve to look. Returns {handled, next_lease|-1, now,
-- first_dead|-1, {{id, attempt, last_error} of each job that went dead}, first_completed|-1}.
local T, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = math.floor(now_us() / 1000)
local ids = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now, 'LIMIT', 0, limit)
local requeued, claimable = 0, 0
local died = {}
for _, id in ipairs(ids) do
  local m = meta_get(id)
  redis.call('ZREM', K_LEASES, id)
  if m and m.state == 'r' and laned(m) then
    -- Leased without the stream: the last attempt goes dead, the others back to their lane (the
    -- receipt stays valid until another reserve takes the job).
    if m.attempt >= m.max then
      local why = 'lease expired without an ack on attempt ' .. fmt(m.attempt) .. ' of ' .. fmt(m.max)
      go_dead(id, m, now, why)
      died[#died + 1] = { id, m.attempt, why }
    else
      lane_unlease(m)
      m.base = m.attempt
      lane_add(id, m)
      meta_put(id, m)
      requeued = requeued + 1
    end
  elseif m and m.state == 'r' and m.sid ~= '-' then
    if m.attempt >= m.max then
      local why = 'lease expired without an ack on attempt ' .. fmt(m.attempt) .. ' of ' .. fmt(m.max)
      go_dead(id, m, now, why)
      died[#died + 1] = { id, m.attempt, why }
    elseif redis.call('XCLAIM', K_READY, GROUP, 'reaper', 0, m.sid, 'IDLE', T, 'JUSTID')[1] then
      m.state = 'q'  -- still pending (its receipt stays valid until another reserve claims it)
      meta_put(id, m)
      requeued = requeued + 1
      claimable = claimable + 1
    end
  end
end
if requeued > 0 then redis.call('HINCRBY', K_COUNTERS, 'redelivered', requeued) end
if claimable > 0 then
  redis.call('HSET', K_COUNTERS, '_claim', '1')
  if ordered() then turn_join('') end  -- claimable deliveries are the default group's ready jobs
end
-- Requeued jobs are ready, and leases that ended in death make room under max_reserved.
if requeued > 0 or #died > 0 then redis.call('PUBLISH', WAKE, 'ready') end
local lease = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
return { #ids, lease[2] and tonumber(lease[2]) or -1, now, first_dead() or -1, died, first_done() or -1 }
