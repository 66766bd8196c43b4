--[[ move_items: move named items from one queue to another (admin), each only if still there.

KEYS[1] settings  KEYS[2] source queue (set)  KEYS[3] target queue (set)
KEYS[4] todo:d (set of downloaders that have a queue of their own)
ARGV[1] downloader owning the target queue, or ''   ARGV[2...] item names

Returns the number moved; -1 for an unknown project. The caller picks names with SSCAN (a
pattern filter, a page at a time) and a name claimed or moved meanwhile is simply not in the
source any more: it is skipped, so an item is never in two places.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local moved = 0
for i = 2, #ARGV do
  if redis.call('SREM', KEYS[2], ARGV[i]) == 1 then
    redis.call('SADD', KEYS[3], ARGV[i])
    moved = moved + 1
  end
end
if moved > 0 and ARGV[1] ~= '' then redis.call('SADD', KEYS[4], ARGV[1]) end
return moved
