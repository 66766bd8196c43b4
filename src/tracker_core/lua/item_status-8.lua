--[[ item_status: where an item is, read atomically (changes nothing).

KEYS[1] settings  KEYS[2] out  KEYS[3] claims  KEYS[4] done  KEYS[5] todo  KEYS[6] todo:backfeed
KEYS[7] todo:secondary  KEYS[8] todo:redo
ARGV[1] item name
Returns {code, status, downloader}: code 200 or -1 (unknown project); status is 'out', 'done',
'todo' or '' (not found); downloader is the claimant of an item that is out, else ''.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, '', ''} end
local item = ARGV[1]
local claim = redis.call('HGET', KEYS[3], item)
if claim then return {200, 'out', string.match(claim, '^[^\t]*')} end
if redis.call('SISMEMBER', KEYS[4], item) == 1 then return {200, 'done', ''} end
for q = 5, 8 do
  if redis.call('SISMEMBER', KEYS[q], item) == 1 then return {200, 'todo', ''} end
end
return {200, '', ''}
