-- ARGV: id, key. Returns "O", "N" (no such job) or "C" (reserved).
local id, m = resolve(1)
if not m then
  local did = resolve_done(1)
  if not did then return 'N' end
  remove_done(did)  -- a completed job kept: deleted
  return 'O'
end
if m.state == 'r' then return 'C' end
remove_job(id, m, math.floor(now_us() / 1000))
if m.state ~= 'd' then announce_outcome(id, 'cancelled') end
return 'O'
