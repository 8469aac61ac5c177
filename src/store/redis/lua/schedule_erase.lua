-- KEYS[1] the schedules hash. ARGV: name, expected generation.
local g = tonumber(redis.call('HGET', KEYS[1], '#' .. ARGV[1]) or '0')
if g == 0 then return 'NOTFOUND' end
if g ~= tonumber(ARGV[2]) then return 'CONFLICT' end
redis.call('HDEL', KEYS[1], ARGV[1], '#' .. ARGV[1])
return 'OK'
