--[[ uploaded: record that a downloader uploaded an item's data somewhere.

KEYS[1] settings  KEYS[2] uploads (stream, capped)  KEYS[3] stats
ARGV[1] now (ms)  ARGV[2] uploader  ARGV[3] item  ARGV[4] server
Returns {code, settings_age}; -1 for an unknown project.
Reply codes by name: scripts.uploaded.codes (Python callers compare against those names).
]]
--@include counters
local settings_key = KEYS[1]
local uploads_key  = KEYS[2]
local stats_key    = KEYS[3]
local age = redis.call('HGET', settings_key, 'settings_age')
if not age then return {-1, 0} end
redis.call('XADD', uploads_key, 'MAXLEN', '~', 10000, '*', 'uploader', ARGV[2], 'item', ARGV[3],
           'server', ARGV[4], 'at', ARGV[1])
bump(stats_key, nil, 'uploads', 1)
return {200, age}
