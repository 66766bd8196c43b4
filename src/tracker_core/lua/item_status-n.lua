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
each limit that can hold it, so the work is bounded by the number of limits (exact lookups),
never by the name. Held items are only under limits in limits_ready (hold_limited adds a limit
with its first item, claim removes it with its last, a removed limit stays until emptied);
an item on its way in may be under any current limit too, looked up only while the way-in set
is not empty (between the two calls of an add).
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, '', ''} end
local item = ARGV[1]
local claim = redis.call('HGET', KEYS[3], item)
if claim then return {200, 'out', string.match(claim, '^[^\t]*')} end
if redis.call('SISMEMBER', KEYS[4], item) == 1 then return {200, 'done', ''} end
for q = 5, 8 do
  if redis.call('SISMEMBER', KEYS[q], item) == 1 then return {200, 'todo', ''} end
end
local arriving = redis.call('SCARD', KEYS[10]) > 0
local seen = {}
for _, limit in ipairs(redis.call('ZRANGE', KEYS[11], 0, -1)) do
  local entry = limit .. '\0' .. item
  if redis.call('ZSCORE', KEYS[9], entry)
      or (arriving and redis.call('SISMEMBER', KEYS[10], entry) == 1) then
    return {200, 'todo', ''}
  end
  seen[limit] = true
end
if arriving then
  for _, limit in ipairs(redis.call('HKEYS', KEYS[12])) do
    if not seen[limit] and redis.call('SISMEMBER', KEYS[10], limit .. '\0' .. item) == 1 then
      return {200, 'todo', ''}
    end
  end
end
return {200, '', ''}
