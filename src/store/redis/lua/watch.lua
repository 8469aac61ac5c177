-- ARGV: id, wait_ms. Notes that someone waits for the job's outcome for wait_ms (and 5 s more: a
-- server's clock and Redis's differ) so its final transition is announced (prelude's
-- announce_outcome); keeps the latest end when several wait; drops the entries whose time is up.
-- Returns 1.
local now = math.floor(now_us() / 1000)
redis.call('ZREMRANGEBYSCORE', K_WAITING, '-inf', now)
local id, until_ms = ARGV[1], now + tonumber(ARGV[2]) + 5000
local had = tonumber(redis.call('ZSCORE', K_WAITING, id) or '0')
if until_ms > had then redis.call('ZADD', K_WAITING, until_ms, id) end
return 1
