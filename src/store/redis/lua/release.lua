-- ARGV: n, then n x (id, token), then a placeholder. Gives back leased deliveries that never
-- reached their consumer (Queue::ReleaseBatch): each job ready again at once (in its lane, or at
-- the end of the stream), that attempt and that delivery not counted. Returns per receipt "O"
-- (released), "N" (no such job), "L" (its lease already ran out: the attempt counted) or
-- "E:<state>:<attempt>:<max>" as ack.
local n = tonumber(ARGV[1])
local now = math.floor(now_us() / 1000)
local out, released = {}, 0
for i = 1, n do
  local id, token = ARGV[2 * i], ARGV[2 * i + 1]
  local m = meta_get(id)
  if not m then
    out[i] = 'N'
  elseif m.state ~= 'r' or m.delivery ~= token then
    out[i] = 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max)
  elseif tonumber(redis.call('ZSCORE', K_LEASES, id) or '0') <= now then
    out[i] = 'L'
  else
    lane_unlease(m)
    leave_stream(m, id)
    redis.call('ZREM', K_LEASES, id)
    m.attempt = m.attempt - 1
    m.base = m.attempt
    m.delivery = '0'
    place(id, m, now)
    meta_put(id, m)
    released = released + 1
    out[i] = 'O'
  end
end
if released > 0 then
  redis.call('HINCRBY', K_COUNTERS, 'delivered', -released)
  redis.call('PUBLISH', WAKE, 'ready')
end
return out
