--[[ set_settings: change project settings and bump the settings age, in one step.

KEYS[1] settings (hash)
ARGV[1] project name (for the notification)  ARGV[2] channel to publish on
ARGV[3...] field, value pairs; an empty value deletes the field
Returns the new settings age, or -1 for an unknown project; -2 (nothing changed) when ARGV
does not end in whole pairs or the stored age is not an integer (checked before any write). Every node compares the age that
each claim and done returns with its cached one, and reloads settings when it changed; the
publication tells the other processes (live feed, maintenance) at once.
Every call also writes SETTINGS_PAD_FIELD, which keeps the hash a hashtable (script_constants.py
says why): a project created by an older tracker gets it at its next change, or when `tracker
maintain` starts (admin/upgrades.py).
Reply codes by name: reply_codes.SetSettings (Python callers compare against those names).
]]
--@constants SETTINGS_PAD_FIELD SETTINGS_PAD
local settings_key = KEYS[1]
if redis.call('EXISTS', settings_key) == 0 then return -1 end
if (#ARGV - 2) % 2 ~= 0 then return -2 end
local stored = redis.call('HGET', settings_key, 'settings_age')
if stored and not string.match(stored, '^%-?%d+$') then return -2 end
for i = 3, #ARGV, 2 do
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
