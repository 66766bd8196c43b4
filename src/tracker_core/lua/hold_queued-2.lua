--[[ hold_queued: move queued items that a limit now matches to the way-in set of held items.

KEYS[1] a shared queue (set)  KEYS[2] todo:limited_in (set of "LIMIT\0ITEM")
ARGV[1...] pairs: item name, "LIMIT\0ITEM"
Returns the number moved; -1 (nothing changed) when ARGV is not whole pairs. An item claimed since
the caller read the queue is not there any more and is skipped, so no item ends up in two places;
hold_limited then files the moved ones.
Reply codes by name: scripts.hold_queued.codes (Python callers compare against those names).
]]
local queue_key      = KEYS[1]
local limited_in_key = KEYS[2]
if #ARGV % 2 ~= 0 then return -1 end
redis.call('SCARD', limited_in_key)       -- a wrong type fails here, before an item leaves its queue
local moved = 0
for i = 1, #ARGV, 2 do
  if redis.call('SREM', queue_key, ARGV[i]) == 1 then
    redis.call('SADD', limited_in_key, ARGV[i + 1])
    moved = moved + 1
  end
end
return moved
