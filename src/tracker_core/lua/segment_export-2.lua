--[[ segment_export: unregister a segment whose file the admin takes out of the project.

KEYS[1] segments (hash)  KEYS[2] stats
ARGV[1] segment number
Returns the items it held (now counted as exported); -1 when it is not registered.
]]
--@include counters
local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if not n then return -1 end
redis.call('HDEL', KEYS[1], ARGV[1])
bump(KEYS[2], nil, 'items_exported', n)
return n
