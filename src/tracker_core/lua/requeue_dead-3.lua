--[[ requeue_dead: put dead items back into a queue, with a fresh claim count.

KEYS[1] dead (hash)  KEYS[2] target queue (set)  KEYS[3] stats (hash)
ARGV[1...] item names
Returns the number requeued; names that are not dead are ignored (so a repeat changes nothing).
]]
--@include counters
local moved = 0
for i = 1, #ARGV do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    redis.call('SADD', KEYS[2], ARGV[i])
    moved = moved + 1
  end
end
bump(KEYS[3], nil, 'items_requeued_dead', moved)
return moved
