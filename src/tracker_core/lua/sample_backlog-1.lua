--[[ sample_backlog: remember the project's backlog once per minute (count vs processed check).

KEYS[1]  minute:M  hash  this minute's counters

ARGV[1] backlog (items queued or out)   ARGV[2] expiry of the minute hash (seconds)

Returns 1 when this call stored the minute's sample, 0 when the minute already had one.
Any reader of the statistics samples (stats.json, /metrics, the live feed); the first of each
minute wins, so many readers cost one field. Comparing samples with the items done in between
tells whether the backlog grows faster than it drains.
Reply codes by name: scripts.sample_backlog.codes (Python callers compare against those names).
]]
local minute_key = KEYS[1]
if redis.call('HSETNX', minute_key, 'backlog', ARGV[1]) == 0 then return 0 end
if redis.call('TTL', minute_key) < 0 then redis.call('EXPIRE', minute_key, tonumber(ARGV[2])) end
return 1
