--[[ item_status: where an item is, read atomically (changes nothing).

KEYS[1] settings  KEYS[2] out  KEYS[3] claims  KEYS[4] done  KEYS[5] todo  KEYS[6] todo:backfeed
KEYS[7] todo:secondary  KEYS[8] todo:redo
KEYS[9] todo:limited (zset of "LIMIT\0ITEM": held items)  KEYS[10] todo:limited_in (set, the same
entries on their way in)  KEYS[11] limits_ready (zset: the limits that have held items)
ARGV[1] item name  ARGV[2] the limit the caller's classification names for it, or ''
Returns {code, status, downloader}: code 200 or -1 (unknown project); status is 'out', 'done',
'todo' or '' (not found); downloader is the claimant of an item that is out, else ''.
An item held back by a limit is queued, so it is 'todo'. It is looked up under ARGV[2] first
(one lookup); only an item found nowhere else is also looked up under every limit that has held
items (one held under a limit removed or changed since, or a caller with stale limits).
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, '', ''} end
local item = ARGV[1]
local claim = redis.call('HGET', KEYS[3], item)
if claim then return {200, 'out', string.match(claim, '^[^\t]*')} end
if redis.call('SISMEMBER', KEYS[4], item) == 1 then return {200, 'done', ''} end
for q = 5, 8 do
  if redis.call('SISMEMBER', KEYS[q], item) == 1 then return {200, 'todo', ''} end
end
local function held_by(limit)
  local entry = limit .. '\0' .. item
  return redis.call('ZSCORE', KEYS[9], entry) or redis.call('SISMEMBER', KEYS[10], entry) == 1
end
if ARGV[2] ~= '' and held_by(ARGV[2]) then return {200, 'todo', ''} end
for _, limit in ipairs(redis.call('ZRANGE', KEYS[11], 0, -1)) do
  if limit ~= ARGV[2] and held_by(limit) then return {200, 'todo', ''} end
end
return {200, '', ''}
