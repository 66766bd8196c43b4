--[[ notify_hooks: add a webhook within the bound on their number, or remove one and its figures.

KEYS[1] hooks       hash  hook id -> JSON record (url, project, events, created_ms, secret)
KEYS[2] hook_stats  hash  "ID:FIGURE" -> value (delivered, failures, dropped, last_status, last_ms)

ARGV[1] 'add' or 'remove'  ARGV[2] hook id  ARGV[3] the JSON record to add ('' to remove)
ARGV[4] most hooks there may be

Returns 1 when the hook was added or removed; 0 when the id to add exists already, or the one to
remove does not; -1 when adding would pass ARGV[4] (nothing written). The deliveries a removed
hook still has queued are dropped by the deliverer, which finds no hook for them.
Reply codes by name: scripts.notify_hooks.codes (Python callers compare against those names).
]]
local hooks_key = KEYS[1]
local stats_key = KEYS[2]
local id = ARGV[2]
if ARGV[1] == 'add' then
  if redis.call('HEXISTS', hooks_key, id) == 1 then return 0 end
  if redis.call('HLEN', hooks_key) >= tonumber(ARGV[4]) then return -1 end
  redis.call('HSET', hooks_key, id, ARGV[3])
  return 1
end
if redis.call('HDEL', hooks_key, id) == 0 then return 0 end
redis.call('HDEL', stats_key, id .. ':delivered', id .. ':failures', id .. ':dropped',
           id .. ':last_status', id .. ':last_ms')
return 1
