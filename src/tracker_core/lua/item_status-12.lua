--[[ item_status: where an item is, read atomically (changes nothing).

KEYS[1] settings  KEYS[2] out  KEYS[3] claims  KEYS[4] done  KEYS[5] todo  KEYS[6] todo:backfeed
KEYS[7] todo:secondary  KEYS[8] todo:redo
KEYS[9] todo:limited (zset of "LIMIT\0ITEM": held items)  KEYS[10] todo:limited_in (set, the same
entries on their way in)  KEYS[11] limits_ready (zset: the limits that have held items)
KEYS[12] limits (hash: the project's limits, by name)
ARGV[1] item name
Returns {code, status, downloader}: code 200 or -1 (unknown project); status is 'out', 'done',
'todo' or '' (not found); downloader is the claimant of an item that is out, else ''.
An item held back by a limit is queued, so it is 'todo'. The caller does not classify the name
(anyone may ask about any name, and classifying is work): its held entry is looked up under
every limit that can hold items, the current ones (an item on its way in) and those in
limits_ready (held under a limit removed since), so the work is bounded by the number of limits
(at most a few thousand exact lookups), never by the name.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, '', ''} end
local item = ARGV[1]
local claim = redis.call('HGET', KEYS[3], item)
if claim then return {200, 'out', string.match(claim, '^[^\t]*')} end
if redis.call('SISMEMBER', KEYS[4], item) == 1 then return {200, 'done', ''} end
for q = 5, 8 do
  if redis.call('SISMEMBER', KEYS[q], item) == 1 then return {200, 'todo', ''} end
end
local held = redis.call('ZCARD', KEYS[9]) > 0
local arriving = redis.call('SCARD', KEYS[10]) > 0
if not held and not arriving then return {200, '', ''} end
local function held_by(limit)
  local entry = limit .. '\0' .. item
  return (held and redis.call('ZSCORE', KEYS[9], entry))
      or (arriving and redis.call('SISMEMBER', KEYS[10], entry) == 1)
end
local seen = {}
for _, limit in ipairs(redis.call('ZRANGE', KEYS[11], 0, -1)) do
  if held_by(limit) then return {200, 'todo', ''} end
  seen[limit] = true
end
for _, limit in ipairs(redis.call('HKEYS', KEYS[12])) do
  if not seen[limit] and held_by(limit) then return {200, 'todo', ''} end
end
return {200, '', ''}
