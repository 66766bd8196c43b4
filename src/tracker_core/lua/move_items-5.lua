--[[ move_items: move named items from one queue to another (admin), each only if still there.

KEYS[1] settings  KEYS[2] source queue (set)  KEYS[3] target queue (set)
KEYS[4] todo:d (set of downloaders that have a queue of their own)
KEYS[5] todo:limited_in (set of "LIMIT\0ITEM": held items on their way to todo:limited)
ARGV[1] downloader owning the target queue, or ''
ARGV[2...] pairs: item name, then "LIMIT\0ITEM" when the item is to be held or '' when not

Returns the number moved; -1 for an unknown project; -2 (nothing changed) when ARGV[2...] is
not whole pairs. The caller picks names with SSCAN (a
pattern filter, a page at a time) and a name claimed or moved meanwhile is simply not in the
source any more: it is skipped, so an item is never in two places. An item moved into a shared
queue that a limit matches (the caller classifies; never for a downloader's own queue) goes to
the way-in set instead of the target, and the caller runs hold_limited to file it, so a move
cannot bypass a limit.
Reply codes by name: scripts.move_items.codes (Python callers compare against those names).
]]
--@include enqueue
local settings_key   = KEYS[1]
local source_key     = KEYS[2]
local target_key     = KEYS[3]
local owners_key     = KEYS[4]
local limited_in_key = KEYS[5]
if redis.call('EXISTS', settings_key) == 0 then return -1 end
if (#ARGV - 1) % 2 ~= 0 then return -2 end
check_enqueue_keys(target_key, limited_in_key)
redis.call('SCARD', owners_key)
local function take(item) return redis.call('SREM', source_key, item) end
return enqueue_taken(ARGV, take, target_key, limited_in_key, owners_key)
