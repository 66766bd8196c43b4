--[[ segment_export: unregister a segment whose file the admin takes out of the project.

KEYS[1] segments (hash)  KEYS[2] segment_queues (hash)  KEYS[3] segment_exports (hash)  KEYS[4] stats
ARGV[1] segment number   ARGV[2] digest of the segment's items (what segment_import checks)
Returns the items it held (now counted as exported); -1 when it is not registered.
The export leaves a ticket (digest -> "ITEMS QUEUE") so that exactly one import of the same items
brings them back as a segment of the queue they came from.
]]
--@include counters
local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if not n then return -1 end
local source = redis.call('HGET', KEYS[2], ARGV[1]) or 'todo'
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[2], n .. ' ' .. source)
bump(KEYS[4], nil, 'items_exported', n)
return n
