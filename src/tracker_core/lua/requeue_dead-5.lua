--[[ requeue_dead: put dead items back into a queue (or their limit's sub-queue), with a fresh claim count.

KEYS[1] dead (hash)  KEYS[2] target queue (set)  KEYS[3] stats (hash)
KEYS[4] todo:limited_in (set of "LIMIT\0ITEM": held items on their way to todo:limited)
KEYS[5] todo:d (set of downloaders that have a queue of their own)
ARGV[1] downloader owning the target queue, or ''
ARGV[2...] pairs: item name, then "LIMIT\0ITEM" when the item is to be held or '' when not
Returns the number requeued; names that are not dead are ignored (so a repeat changes nothing);
-1 (nothing changed) when ARGV[2...] is not whole pairs.
An item requeued into a shared queue that a limit matches (the caller classifies; never for a
downloader's own queue) goes to the way-in set instead, and the caller runs hold_limited to file
it, so a requeue cannot bypass a limit. A downloader's queue is registered in todo:d.
Reply codes by name: scripts.requeue_dead.codes (Python callers compare against those names).
]]
--@include counters
--@include enqueue
local dead_key       = KEYS[1]
local target_key     = KEYS[2]
local stats_key      = KEYS[3]
local limited_in_key = KEYS[4]
local owners_key     = KEYS[5]
if (#ARGV - 1) % 2 ~= 0 then return -1 end
check_enqueue_keys(target_key, limited_in_key)
redis.call('SCARD', owners_key)
redis.call('HLEN', stats_key)
local function take(item) return redis.call('HDEL', dead_key, item) end
local moved = enqueue_taken(ARGV, take, target_key, limited_in_key, owners_key)
bump(stats_key, nil, 'items_requeued_dead', moved)
return moved
