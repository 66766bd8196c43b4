--[[ item_status: every place an item can be, read atomically (changes nothing).

KEYS[1] settings  KEYS[2] claims (hash: item -> "DOWNLOADER\tIP\tTIMES_CLAIMED")  KEYS[3] done
KEYS[4] dead (hash: item -> JSON record)  KEYS[5] todo  KEYS[6] todo:backfeed
KEYS[7] todo:secondary  KEYS[8] todo:redo
KEYS[9] todo:limited (zset of "LIMIT\0ITEM": held items)  KEYS[10] todo:limited_in (set, the same
entries on their way in)  KEYS[11] limits_ready (zset: the limits that have held items)
KEYS[12] limits (hash: the project's limits, by name)
KEYS[13] offloading (set: items on their way to a segment file)
KEYS[14] segments (hash: segment number -> items; field '#next' numbers them)
KEYS[15] segment_queues (hash; field '#staged' is "NUMBER SOURCE" of the set in offloading)
KEYS[16] todo:d (set: downloaders with a queue of their own)
KEYS[17] out (zset: item -> when it may be reclaimed; a record of three fields: its claim time)
KEYS[18] reclaim_history (hash: item -> JSON list of its earlier claim rounds)
KEYS[19 .. 18+D] downloaders' own queues (at most the caller's cap of them)
ARGV[1] item name  ARGV[2 .. 1+D] the downloaders whose queues are KEYS[19 ..], in that order

Returns {code, status, queue, detail, owners, segments, out_score, extra}; code 200, or -1
(unknown project: the rest empty). status and what comes with it:
  'out'       detail: the claim record (the caller keeps the downloader and the claim count,
              and the IP for admins only); out_score: its `out` score (the claim time of a
              record of three fields, which has none of its own); extra: its earlier claim
              rounds (JSON, '' when claimed once)
  'done'
  'dead'      detail: the dead record (JSON)
  'todo'      queue: todo, backfeed, secondary, redo, downloader:NAME or limited; detail: the
              limit that holds it (queue 'limited')
  'offloaded' queue: the source of the segment it is being written to (a queue, or done);
              extra: that segment's number
  ''          found nowhere here (unknown, done and discarded, or in a segment file)
owners is SCARD of todo:d and segments the number of registered segment files, both only for
'' (the caller tells from them whether a downloader's queue went unlooked-at, or the list it
passed is stale, and whether the item may sit in a segment file: files are not opened here).
The caller never classifies the name (anyone may ask about any name, and classifying is work):
its held entry is looked up under each limit that can hold it, so the work is bounded by the
number of limits and of downloader queues passed (exact lookups), never by the name. Held
items are only under limits in limits_ready (hold_limited adds a limit with its first item,
claim removes it with its last, a removed limit stays until emptied); an item on its way in
may be under any current limit too, looked up only while the way-in set is not empty.
Reply codes by name: scripts.item_status.codes (Python callers compare against those names).
]]
local settings_key       = KEYS[1]
local claims_key         = KEYS[2]
local done_key           = KEYS[3]
local dead_key           = KEYS[4]
local limited_key        = KEYS[9]
local limited_in_key     = KEYS[10]
local limits_ready_key   = KEYS[11]
local limits_key         = KEYS[12]
local offloading_key     = KEYS[13]
local segments_key       = KEYS[14]
local segment_queues_key = KEYS[15]
local owners_key         = KEYS[16]
local out_key            = KEYS[17]
local reclaim_history_key = KEYS[18]
local FIRST_QUEUE = 5       -- KEYS[5..8]: todo, backfeed, secondary, redo
local FIRST_OWN_QUEUE = 19  -- KEYS[19 ..]: the downloaders' own queues, ARGV[2 ..] their names
if redis.call('EXISTS', settings_key) == 0 then return {-1, '', '', '', 0, 0, '', ''} end
local item = ARGV[1]
local claim = redis.call('HGET', claims_key, item)
if claim then
  -- Read with the claim, so the rounds and the claim time are of this very claim.
  return {200, 'out', '', claim, 0, 0, redis.call('ZSCORE', out_key, item) or '',
          redis.call('HGET', reclaim_history_key, item) or ''}
end
if redis.call('SISMEMBER', done_key, item) == 1 then return {200, 'done', '', '', 0, 0, '', ''} end
local dead = redis.call('HGET', dead_key, item)
if dead then return {200, 'dead', '', dead, 0, 0, '', ''} end
local shared = {'todo', 'backfeed', 'secondary', 'redo'}
for q = FIRST_QUEUE, FIRST_QUEUE + 3 do
  if redis.call('SISMEMBER', KEYS[q], item) == 1 then
    return {200, 'todo', shared[q - FIRST_QUEUE + 1], '', 0, 0, '', ''}
  end
end
for i = FIRST_OWN_QUEUE, #KEYS do
  if redis.call('SISMEMBER', KEYS[i], item) == 1 then
    return {200, 'todo', 'downloader:' .. ARGV[i - FIRST_OWN_QUEUE + 2], '', 0, 0, '', ''}
  end
end
local arriving = redis.call('SCARD', limited_in_key) > 0
local seen = {}
for _, limit in ipairs(redis.call('ZRANGE', limits_ready_key, 0, -1)) do
  local entry = limit .. '\0' .. item
  if redis.call('ZSCORE', limited_key, entry)
      or (arriving and redis.call('SISMEMBER', limited_in_key, entry) == 1) then
    return {200, 'todo', 'limited', limit, 0, 0, '', ''}
  end
  seen[limit] = true
end
if arriving then
  for _, limit in ipairs(redis.call('HKEYS', limits_key)) do
    if not seen[limit] and redis.call('SISMEMBER', limited_in_key, limit .. '\0' .. item) == 1 then
      return {200, 'todo', 'limited', limit, 0, 0, '', ''}
    end
  end
end
if redis.call('SISMEMBER', offloading_key, item) == 1 then
  local staged = redis.call('HGET', segment_queues_key, '#staged') or ''
  local number, source = string.match(staged, '^(%S+) (.+)$')
  return {200, 'offloaded', source or 'todo', '', 0, 0, '', number or ''}
end
local segments = redis.call('HLEN', segments_key) - redis.call('HEXISTS', segments_key, '#next')
return {200, '', '', '', redis.call('SCARD', owners_key), segments, '', ''}
