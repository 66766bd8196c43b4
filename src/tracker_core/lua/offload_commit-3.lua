--[[ offload_commit: register a durable segment file and drop its items from Redis, in one step.

KEYS[1] offloading (set)  KEYS[2] segments (hash: segment number -> items)  KEYS[3] stats
ARGV[1] segment number   ARGV[2] items in the file (must equal the offloading set's size)
Returns 1; 0 when the set does not hold ARGV[2] items (nothing changes: the caller aborts).
]]
--@include counters
local n = tonumber(ARGV[2])
if redis.call('SCARD', KEYS[1]) ~= n then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], n)
redis.call('DEL', KEYS[1])
bump(KEYS[3], nil, 'items_offloaded', n)
return 1
