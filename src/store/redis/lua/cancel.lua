-- ARGV: id, key. Returns "O", "N" (no such job) or "C" (reserved).
local id, m = resolve(1)
if not m then return 'N' end
if m.state == 'r' then return 'C' end
remove_job(id, m, math.floor(now_us() / 1000))
return 'O'
