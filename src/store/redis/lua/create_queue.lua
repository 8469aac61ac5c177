-- Creates a queue's home config: its shard count and, for a queue made now, key_route crc16, in
-- one step (a server reading in between must never see the shards without the routing).
if redis.call('HSETNX', KEYS[1], 'shards', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'key_route', 'crc16')
end
return 1
