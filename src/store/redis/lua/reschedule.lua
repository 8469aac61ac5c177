-- ARGV: id, key, mode d|a, value, max_delay_ms. Returns {id, due}, or "N", "C" (reserved),
-- "D" (dead), "K" (completed), "I:<now>" (too far ahead).
local id, m = resolve(1)
if not m then return resolve_done(1) and 'K' or 'N' end
if m.state == 'r' then return 'C' end
if m.state == 'd' then return 'D' end
local now = math.floor(now_us() / 1000)
local due, value = now, tonumber(ARGV[4])
if ARGV[3] == 'd' then
  due = now + value
else
  if value > now + tonumber(ARGV[5]) then return 'I:' .. fmt(now) end
  if value > now then due = value end
end
if m.state == 's' then redis.call('ZREM', K_DUE, id) end
leave_stream(m, id)
local earliest = earliest_due()
m.base = m.attempt
m.delivery = '0'
m.due = due
if place(id, m, now) then
  redis.call('PUBLISH', WAKE, 'ready')
elseif not earliest or due < earliest then
  redis.call('PUBLISH', WAKE, 'due ' .. fmt(due))
end
meta_put(id, m)
return { id, due }
