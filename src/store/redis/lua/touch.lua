-- ARGV: id, token, lease_ms, T, consumer, progress ('' = none; else '|' then the JSON text).
-- Returns the new lease deadline, or "N" / "E:..." as ack.
-- (ARGV[4], T, is not read: a touch sets the idle time to 0, below any T.)
local id, token, lease, consumer, progress = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[5], ARGV[6]
local function note_progress()
  if progress ~= '' then redis.call('HSET', K_PROGRESS, id, token .. progress) end
end
local m = meta_get(id)
if not m then return 'N' end
if laned(m) and (m.state == 'r' or m.state == 'q') and m.delivery == token and m.delivery ~= '0' then
  local now = math.floor(now_us() / 1000)
  if m.state == 'q' then  -- its lease had run out, but no one else has it: take it back
    lane_remove(id, m)
    m.state = 'r'
    lane_lease(m)
    meta_put(id, m)
  end
  redis.call('ZADD', K_LEASES, now + lease, id)
  note_progress()
  return now + lease
end
if (m.state ~= 'r' and m.state ~= 'q') or m.delivery ~= token or m.sid == '-' then
  return 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max)
end
-- Idle time back to 0: a claimable delivery (state q, after the reaper) is not any more, and a
-- lease touched for longer than T cannot become claimable while it holds.
local claimed = redis.call('XCLAIM', K_READY, GROUP, consumer, 0, m.sid, 'IDLE', 0, 'JUSTID')
if not claimed[1] then return 'E:' .. m.state .. ':' .. fmt(m.attempt) .. ':' .. fmt(m.max) end
local now = math.floor(now_us() / 1000)
m.state = 'r'
meta_put(id, m)
redis.call('ZADD', K_LEASES, now + lease, id)
note_progress()
return now + lease
