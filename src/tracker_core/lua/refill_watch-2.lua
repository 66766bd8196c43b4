--[[ refill_watch: set or clear what makes a claim ask the maintainer for a refill at once.

KEYS[1] the project's maintain lease (string: holder id)  KEYS[2] settings (hash)
ARGV[1] lease holder  ARGV[2] REFILL_WATCH_FIELD's new value, BELOW x 16 + QUEUES: a queue size,
and a bit per shared queue whose segments wait on disk (1 todo, 2 todo:backfeed, 4
todo:secondary, 8 todo:redo: the claim's queues after the downloader's own, in its serve order),
at least one; '' clears the field
Returns 1 when the field now holds ARGV[2] (or is cleared); -1 for an unknown project (the
settings hash is never created here: that would make a deleted project exist again); -4 when
ARGV[1] does not hold the lease (only the maintainer that refills may ask claims to wake it);
-3 for a value claim-21.lua could not read. Only 1 changes anything, and no setting changes
(the settings age stays: no process reloads for it).
Reply codes by name: scripts.refill_watch.codes (Python callers compare against those names).
]]
--@constants REFILL_WATCH_FIELD
local lease_key    = KEYS[1]
local settings_key = KEYS[2]
if redis.call('GET', lease_key) ~= ARGV[1] then return -4 end
if redis.call('HEXISTS', settings_key, 'settings_age') == 0 then return -1 end
local value = ARGV[2]
if value == '' then
  redis.call('HDEL', settings_key, REFILL_WATCH_FIELD)
  return 1
end
-- Digits only (no sign, point or exponent) and below 2^53: claim-21.lua reads it exactly.
if not string.match(value, '^%d+$') or #value > 15 or tonumber(value) % 16 == 0 then return -3 end
redis.call('HSET', settings_key, REFILL_WATCH_FIELD, value)
return 1
