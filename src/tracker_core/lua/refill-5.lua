--[[ refill: put a segment's items back into the queue they came from and unregister it, in one step.

KEYS[1] the project's maintain lease  KEYS[2] segments (hash)  KEYS[3] segment_queues (hash)
KEYS[4] the target queue (set)  KEYS[5] stats
ARGV[1] lease holder  ARGV[2] segment number  ARGV[3] target queue's name
ARGV[4] refill only while the target queue holds fewer items than this ('': whatever it holds)
ARGV[5...] the segment's items, as read from its file
Returns the number of items refilled; -1 when the segment is not registered (already refilled or
exported); -4 when ARGV[1] does not hold the lease; -5 when the segment came from another queue
than ARGV[3] (done segments are never refilled: they are done, not work); -6 when the file holds
another number of items than the segment registered; -7 when the queue holds ARGV[4] items or
more (the maintainer and its refiller thread both refill: the one that looks second finds the
queue full enough here, in the same step, and no queue is refilled past offload_high; the
refiller asked by a claim sends it without counting the queue first, a call fewer before the
items are back). Only a count >= 0 changes anything; the caller deletes the file only after that.
Reply codes by name: scripts.refill.codes (Python callers compare against those names).
]]
--@constants UNPACK_CHUNK
--@include counters
local lease_key          = KEYS[1]
local segments_key       = KEYS[2]
local segment_queues_key = KEYS[3]
local target_key         = KEYS[4]
local stats_key          = KEYS[5]
if redis.call('GET', lease_key) ~= ARGV[1] then return -4 end
local registered = redis.call('HGET', segments_key, ARGV[2])
if not registered then return -1 end
local source = redis.call('HGET', segment_queues_key, ARGV[2]) or 'todo'
if source ~= ARGV[3] or source == 'done' then return -5 end
if tonumber(registered) ~= #ARGV - 4 then return -6 end
-- A wrong type fails here, before the segment is unregistered.
local size = redis.call('SCARD', target_key)
local below = tonumber(ARGV[4])
if below and size >= below then return -7 end
redis.call('HDEL', segments_key, ARGV[2])
redis.call('HDEL', segment_queues_key, ARGV[2])
for i = 5, #ARGV, UNPACK_CHUNK do
  redis.call('SADD', target_key, unpack(ARGV, i, math.min(i + UNPACK_CHUNK - 1, #ARGV)))
end
bump(stats_key, nil, 'items_refilled', #ARGV - 4)
return #ARGV - 4
