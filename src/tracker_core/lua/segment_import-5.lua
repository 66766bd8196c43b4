--[[ segment_import: register a segment file that was exported from this project, once.

KEYS[1] settings  KEYS[2] segments (hash)  KEYS[3] segment_queues (hash)  KEYS[4] segment_exports
(hash: digest -> "ITEMS QUEUE", left by segment_export)  KEYS[5] stats
ARGV[1] segment number (from the segments' '#next' counter)  ARGV[2] items in the file
ARGV[3] digest of the file's items
Returns 1; -1 for an unknown project; -2 when no export of these items is waiting to come back
(imported already, or never exported from here: the caller passes the items through the Bloom
filter instead, which drops those the project has seen); 0 when the number is taken.
Nothing changes unless it returns 1; the ticket is used up, so a second import cannot duplicate.
Reply codes by name: scripts.segment_import.codes (Python callers compare against those names).
]]
--@include counters
local settings_key        = KEYS[1]
local segments_key        = KEYS[2]
local segment_queues_key  = KEYS[3]
local segment_exports_key = KEYS[4]
local stats_key           = KEYS[5]
if redis.call('EXISTS', settings_key) == 0 then return -1 end
local ticket = redis.call('HGET', segment_exports_key, ARGV[3])
if not ticket then return -2 end
local n, source = string.match(ticket, '^(%d+) (.+)$')
if not n or tonumber(n) ~= tonumber(ARGV[2]) then return -2 end
if redis.call('HSETNX', segments_key, ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HSET', segment_queues_key, ARGV[1], source)
redis.call('HDEL', segment_exports_key, ARGV[3])
bump(stats_key, nil, 'items_imported', tonumber(ARGV[2]))
return 1
