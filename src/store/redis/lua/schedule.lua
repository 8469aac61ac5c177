-- ARGV: bucket_ms, n. Counts scheduled jobs per bucket from the current minute.
-- Returns {start, later, count_0, ..., count_n-1}.
local now = math.floor(now_us() / 1000)
local start = now - now % 60000
local bucket, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = { start, redis.call('ZCOUNT', K_DUE, '(' .. fmt(start + n * bucket - 1), '+inf') }
for i = 0, n - 1 do
  local lo = (i == 0) and '-inf' or fmt(start + i * bucket)
  out[#out + 1] = redis.call('ZCOUNT', K_DUE, lo, '(' .. fmt(start + (i + 1) * bucket))
end
return out
