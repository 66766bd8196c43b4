--[[ segment_export: unregister a segment whose file the admin takes out of the project.

KEYS[1] segments (hash)  KEYS[2] segment_queues (hash)  KEYS[3] segment_exports (hash)  KEYS[4] stats
ARGV[1] segment number   ARGV[2] digest of the segment's items (what segment_import checks)
Returns the items it held (now counted as exported); -1 when it is not registered.
The export leaves a ticket (digest -> "ITEMS QUEUE") so that exactly one import of the same items
brings them back as a segment of the queue they came from.
Reply codes by name: scripts.segment_export.codes (Python callers compare against those names).
]]
--@include counters
local segments_key        = KEYS[1]
local segment_queues_key  = KEYS[2]
local segment_exports_key = KEYS[3]
local stats_key           = KEYS[4]
local n = tonumber(redis.call('HGET', segments_key, ARGV[1]))
if not n then return -1 end
local source = redis.call('HGET', segment_queues_key, ARGV[1]) or 'todo'
redis.call('HDEL', segments_key, ARGV[1])
redis.call('HDEL', segment_queues_key, ARGV[1])
redis.call('HSET', segment_exports_key, ARGV[2], n .. ' ' .. source)
bump(stats_key, nil, 'items_exported', n)
return n
