--[[ clear_queue: drop every item of one queue (admin), counting what was dropped.

KEYS[1] settings  KEYS[2] the queue (set)
Returns the number of items dropped; -1 for an unknown project. UNLINK frees the memory in the
background, so clearing millions of items does not stall Redis.
Reply codes by name: scripts.clear_queue.codes (Python callers compare against those names).
]]
local settings_key = KEYS[1]
local queue_key    = KEYS[2]
if redis.call('EXISTS', settings_key) == 0 then return -1 end
local n = redis.call('SCARD', queue_key)
redis.call('UNLINK', queue_key)
return n
