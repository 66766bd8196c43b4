--[[ add_items: queue new items, skipping any name the project already has anywhere.

KEYS[1] settings  KEYS[2] target queue (set)  KEYS[3] todo  KEYS[4] todo:backfeed
KEYS[5] todo:secondary  KEYS[6] todo:redo  KEYS[7] out  KEYS[8] done  KEYS[9] stats
KEYS[10] todo:d (set of downloaders that have a queue of their own)
ARGV[1] downloader owning the target queue, or ''   ARGV[2...] item names

Returns {added, duplicates}; {-1, 0} for an unknown project. Keeps the invariant that every item
is in exactly one place: a name already queued, claimed or done is not added again.
]]
--@include counters
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local added, duplicates = 0, 0
for i = 2, #ARGV do
  local item = ARGV[i]
  local seen = redis.call('SISMEMBER', KEYS[2], item) == 1
  if not seen then
    for q = 3, 6 do
      if redis.call('SISMEMBER', KEYS[q], item) == 1 then seen = true break end
    end
  end
  if not seen then
    seen = redis.call('ZSCORE', KEYS[7], item) ~= false
        or redis.call('SISMEMBER', KEYS[8], item) == 1
  end
  if seen then
    duplicates = duplicates + 1
  else
    redis.call('SADD', KEYS[2], item)
    added = added + 1
  end
end
if ARGV[1] ~= '' and added > 0 then redis.call('SADD', KEYS[10], ARGV[1]) end
bump(KEYS[9], nil, 'items_added', added)
bump(KEYS[9], nil, 'items_duplicate', duplicates)
return {added, duplicates}
