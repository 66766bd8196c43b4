--[[ release: give claims back: to the main queue, or to their limit's sub-queue when held.

KEYS[1] settings  KEYS[2] out  KEYS[3] claims  KEYS[4] todo  KEYS[5] downloader_claims  KEYS[6] stats
KEYS[7] todo:limited_in (set of "LIMIT\0ITEM": held items on their way to todo:limited)
KEYS[8] reclaim_history (hash: earlier claim rounds of items claimed more than once; cleared)
ARGV[1] now (ms)  ARGV[2] downloader, or '' to release whoever holds the claim (admin)
ARGV[3] the settings age the caller classified the items at, or '' (no check)
ARGV[4...] pairs: item name, then "LIMIT\0ITEM" when a limit matches it or '' when none does

Returns {code, settings_age, released, ignored, held}; -1 for an unknown project; -2 (nothing
changed) when ARGV[3] is not the project's settings age: the limits may have changed since the
caller classified, so it reloads them and calls again. A claim held by another downloader than
ARGV[2] is left alone (ignored), as is a name that is not claimed. A released item that a limit
matches goes to the way-in set (counted as queued, like todo), never to todo: the caller then
runs hold_limited, which files it in the limit's sub-queue, so a release cannot bypass a limit.
Reply codes by name: scripts.release.codes (Python callers compare against those names).
]]
--@include counters
--@include enqueue
--@include claim_record
local settings_key          = KEYS[1]
local out_key               = KEYS[2]
local claims_key            = KEYS[3]
local todo_key              = KEYS[4]
local downloader_claims_key = KEYS[5]
local stats_key             = KEYS[6]
local limited_in_key        = KEYS[7]
local reclaim_history_key   = KEYS[8]
local age = redis.call('HGET', settings_key, 'settings_age')
if not age then return {-1, 0} end
if ARGV[3] ~= '' and ARGV[3] ~= age then return {-2, age} end
-- Every place written below is checked for its type before the first write: Redis keeps a
-- failed script's writes, and a claim that left `out` but reached no queue would be lost.
check_enqueue_keys(todo_key, limited_in_key)
redis.call('ZCARD', out_key)
redis.call('HLEN', downloader_claims_key)
redis.call('HLEN', reclaim_history_key)
local only = ARGV[2]
local released, ignored, held = 0, 0, 0
for i = 4, #ARGV - 1, 2 do
  local item, entry = ARGV[i], ARGV[i + 1]
  local claim = redis.call('HGET', claims_key, item)
  local claimant = claim and string.match(claim, '^[^\t]*')
  if claim and (only == '' or claimant == only) then
    redis.call('ZREM', out_key, item)
    redis.call('HDEL', claims_key, item)
    local _, _, times = parse_claim(claim)
    if (times or 1) > 1 then redis.call('HDEL', reclaim_history_key, item) end
    if not enqueue_or_hold(todo_key, limited_in_key, item, entry) then held = held + 1 end
    if redis.call('HINCRBY', downloader_claims_key, claimant, -1) <= 0 then
      redis.call('HDEL', downloader_claims_key, claimant)
    end
    released = released + 1
  else
    ignored = ignored + 1
  end
end
bump(stats_key, nil, 'items_released', released)
return {200, age, released, ignored, held}
