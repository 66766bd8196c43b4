--[[ create_project: create a project's settings with defaults, unless it exists.

KEYS[1] settings (hash)  KEYS[2] blocked (set)  KEYS[3] stats (hash)
ARGV[1] now (ms)  ARGV[2...] field, value pairs of the initial settings, then
the literal '--blocked' and the globally blocked entries to copy (global blocks live in every
project's own set so the claim script never reads a key outside the project's slot).
Returns 1 if created, 0 if it already existed. The settings get SETTINGS_PAD_FIELD and the stats
STATS_PAD_FIELD (0) too, which keep both hashes hashtables (script_constants.py says why).
Reply codes by name: scripts.create_project.codes (Python callers compare against those names).
]]
--@constants SETTINGS_PAD_FIELD SETTINGS_PAD STATS_PAD_FIELD
local settings_key = KEYS[1]
local blocked_key  = KEYS[2]
local stats_key    = KEYS[3]
if redis.call('EXISTS', settings_key) == 1 then return 0 end
-- The types of the keys written after the settings, before that first write: a key left with
-- the wrong type fails the call, not after half a project was made.
redis.call('HLEN', stats_key)
redis.call('SCARD', blocked_key)
local i = 2
local fields = {'settings_age', 1, 'created_ms', ARGV[1], SETTINGS_PAD_FIELD, SETTINGS_PAD}
while i <= #ARGV and ARGV[i] ~= '--blocked' do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1]
  i = i + 2
end
redis.call('HSET', settings_key, unpack(fields))
redis.call('HSETNX', stats_key, STATS_PAD_FIELD, '0')
for j = i + 1, #ARGV do redis.call('SADD', blocked_key, ARGV[j]) end
return 1
