--[[ offload_stage: take items out of todo into the set of items on their way to a segment file.

KEYS[1] todo (set)  KEYS[2] offloading (set)
ARGV[1] items to take
Returns the number taken; -2 when an earlier offload was not finished (recover it first).
The items stay in Redis (offloading is counted as queued) until offload_commit registers the
file that holds them, which the caller does only once the file is durably on disk.
]]
if redis.call('EXISTS', KEYS[2]) == 1 then return -2 end
local taken = redis.call('SPOP', KEYS[1], tonumber(ARGV[1]))
for i = 1, #taken, 5000 do
  redis.call('SADD', KEYS[2], unpack(taken, i, math.min(i + 4999, #taken)))
end
return #taken
