--[[ refill: put a segment's items back into todo and unregister the segment, in one step.

KEYS[1] segments (hash)  KEYS[2] todo (set)  KEYS[3] stats
ARGV[1] segment number   ARGV[2...] its items, as read from the file
Returns the number of items refilled; -1 when the segment is not registered (already refilled
or exported: nothing changes). The caller deletes the file only after this returned.
]]
--@include counters
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return -1 end
for i = 2, #ARGV, 5000 do
  redis.call('SADD', KEYS[2], unpack(ARGV, i, math.min(i + 4999, #ARGV)))
end
bump(KEYS[3], nil, 'items_refilled', #ARGV - 1)
return #ARGV - 1
