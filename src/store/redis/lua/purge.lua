-- ARGV: limit. Deletes the oldest `limit` dead jobs; returns how many.
local ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[1]) - 1)
for _, id in ipairs(ids) do
  local m = meta_get(id)
  if m then remove_job(id, m) else redis.call('ZREM', K_DEAD, id) end
end
return #ids
