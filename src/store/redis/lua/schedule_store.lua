-- KEYS[1] the schedules hash. ARGV: name, expected generation, record, most schedules per queue,
-- a new schedule's first generation (FirstGeneration()).
local g = tonumber(redis.call('HGET', KEYS[1], '#' .. ARGV[1]) or '0')
if g ~= tonumber(ARGV[2]) then return 'CONFLICT' end
if g == 0 and redis.call('HLEN', KEYS[1]) / 2 >= tonumber(ARGV[4]) then return 'LIMIT' end
local next = g + 1
if g == 0 then next = ARGV[5] end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3], '#' .. ARGV[1], next)
return 'OK'
