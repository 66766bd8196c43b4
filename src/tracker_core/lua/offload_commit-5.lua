--[[ offload_commit: register a durable segment file and drop its items from Redis, in one step.

KEYS[1] the project's maintain lease  KEYS[2] offloading (set)  KEYS[3] segments (hash: number
-> items)  KEYS[4] segment_queues (hash: number -> source name)  KEYS[5] stats
ARGV[1] lease holder  ARGV[2] segment number  ARGV[3] items in the file  ARGV[4] source name
Returns 1; 0 when the staged set is not the one the caller wrote to the file ('#staged' names
another number or source, or the set holds another number of items); -4 when ARGV[1] does not
hold the lease. On 0 and -4 nothing changes: the caller leaves its file unregistered (a stale
file, removed later) and stops its pass.
Reply codes by name: scripts.offload_commit.codes (Python callers compare against those names).
]]
--@include counters
local lease_key          = KEYS[1]
local offloading_key     = KEYS[2]
local segments_key       = KEYS[3]
local segment_queues_key = KEYS[4]
local stats_key          = KEYS[5]
if redis.call('GET', lease_key) ~= ARGV[1] then return -4 end
if redis.call('HGET', segment_queues_key, '#staged') ~= ARGV[2] .. ' ' .. ARGV[4] then return 0 end
local n = tonumber(ARGV[3])
if redis.call('SCARD', offloading_key) ~= n then return 0 end
redis.call('HSET', segments_key, ARGV[2], n)
redis.call('HSET', segment_queues_key, ARGV[2], ARGV[4])
redis.call('HDEL', segment_queues_key, '#staged')
redis.call('DEL', offloading_key)
bump(stats_key, nil, ARGV[4] == 'done' and 'done_items_offloaded' or 'items_offloaded', n)
return 1
