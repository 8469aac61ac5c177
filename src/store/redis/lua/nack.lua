-- ARGV: id, token, retry_ms (-1: back-off), error, dead 0|1, base_ms, factor, max_ms, jitter
-- (policy.jitter * (2u - 1) for u uniform in [0, 1)), 1|0: announce a lease that ended in death
-- (as ack). Returns {"s", due} or {"d", due, dead_at}, or "N" / "E:..." as
-- ack. A job that goes dead keeps the due time it had (as on the embedded store).
local id, token = ARGV[1], ARGV[2]
local m = meta_get(id)
if not m then return 'N' end
if m.state == 'd' or m.state == 's' or m.delivery ~= token then
  return 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max)
end
local now = math.floor(now_us() / 1000)
redis.call('HINCRBY', K_COUNTERS, 'nacked', 1)
if ARGV[5] == '1' or m.attempt >= m.max then
  go_dead(id, m, now, ARGV[4])
  if ARGV[10] == '1' then redis.call('PUBLISH', WAKE, 'ready') end
  return { 'd', m.due, now }
end
lane_unlease(m)
local delay = tonumber(ARGV[3])
if delay < 0 then
  delay = backoff_ms(m.attempt, tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]))
end
leave_stream(m, id)
redis.call('ZREM', K_LEASES, id)
redis.call('HSET', K_ERRORS, id, ARGV[4])
local earliest = earliest_due()
m.base = m.attempt
m.delivery = '0'
m.due = now + delay
if place(id, m, now) then
  redis.call('PUBLISH', WAKE, 'ready')
elseif not earliest or m.due < earliest then
  redis.call('PUBLISH', WAKE, 'due ' .. fmt(m.due))
end
meta_put(id, m)
return { 's', m.due }
