--[[ clear_queue: drop every item of one queue (admin), counting what was dropped.

KEYS[1] settings  KEYS[2] the queue (set)
Returns the number of items dropped; -1 for an unknown project. UNLINK frees the memory in the
background, so clearing millions of items does not stall Redis.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local n = redis.call('SCARD', KEYS[2])
redis.call('UNLINK', KEYS[2])
return n
