--[[ set_settings: change project settings and bump the settings age, in one step.

KEYS[1] settings (hash)
ARGV[1] project name (for the notification)  ARGV[2] channel to publish on
ARGV[3] N, then N field, value pairs the stored settings must still hold ('' for absent)
ARGV[4 + 2N...] field, value pairs to write; an empty value deletes the field
Returns the new settings age, or -1 for an unknown project; -2 (nothing changed) when ARGV
does not end in whole pairs or the stored age is not an integer; -3 (nothing changed) when a
field differs from the value the caller expects. All checked before any write.
The caller checks some settings as a whole (settings.offload_rules: offload_high, offload_low and
offload_segment_items together) against what it read, and sends what it read as the expected
pairs: a change made in between is refused here, in the same step as the write, so the stored
whole is always the one that was checked; the caller reads again and checks again.
Every node compares the age that each claim and done returns with its cached one, and reloads
settings when it changed; the publication tells the other processes (live feed, maintenance)
at once.
Every call also writes SETTINGS_PAD_FIELD, which keeps the hash a hashtable (script_constants.py
says why): a project created by an older tracker gets it at its next change, or when `tracker
maintain` starts (admin/upgrades.py).
Reply codes by name: scripts.set_settings.codes (Python callers compare against those names).
]]
--@constants SETTINGS_PAD_FIELD SETTINGS_PAD
local settings_key = KEYS[1]
if redis.call('EXISTS', settings_key) == 0 then return -1 end
local expected = tonumber(ARGV[3])
if not expected or expected < 0 or expected % 1 ~= 0 then return -2 end
local first = 4 + 2 * expected
if first > #ARGV + 1 or (#ARGV - first + 1) % 2 ~= 0 then return -2 end
local stored = redis.call('HGET', settings_key, 'settings_age')
if stored and not string.match(stored, '^%-?%d+$') then return -2 end
for i = 4, first - 1, 2 do
  if (redis.call('HGET', settings_key, ARGV[i]) or '') ~= ARGV[i + 1] then return -3 end
end
for i = first, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', settings_key, ARGV[i])
  else
    redis.call('HSET', settings_key, ARGV[i], ARGV[i + 1])
  end
end
redis.call('HSET', settings_key, SETTINGS_PAD_FIELD, SETTINGS_PAD)
local age = redis.call('HINCRBY', settings_key, 'settings_age', 1)
redis.call('PUBLISH', ARGV[2], ARGV[1] .. ' ' .. age)
return age
