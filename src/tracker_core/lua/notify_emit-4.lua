--[[ notify_emit: write what the event detector saw and queue the deliveries of the events it
found, in one step, only if nobody wrote that state since the detector read it.

KEYS[1] state       hash  project name or "node:HOST" or "redis" -> JSON (what was last seen)
KEYS[2] deliveries  hash  delivery id -> JSON record (hook, event, attempts, created_ms)
KEYS[3] due         zset  delivery id -> when it is next tried (ms)
KEYS[4] stats       hash  the outbox's counters (queued, dropped_full, delivered, dropped, gone)

ARGV[1] now (ms)
ARGV[2] most deliveries the outbox holds
ARGV[3] the state changes: a JSON object, field -> [the value read (false: none), the value to
        write (false: delete the field)]
ARGV[4...] the deliveries: pairs of delivery id and JSON record

Returns {1, QUEUED}: the state written and QUEUED deliveries added, due at once (those past
ARGV[2] are counted in dropped_full instead; an id already in the outbox is not queued again);
0 when a field no longer holds the value read (another maintainer saw the change first):
nothing is written, and the caller reads again.
Reply codes by name: scripts.notify_emit.codes (Python callers compare against those names).
]]
local state_key      = KEYS[1]
local deliveries_key = KEYS[2]
local due_key        = KEYS[3]
local stats_key      = KEYS[4]
local now, most = tonumber(ARGV[1]), tonumber(ARGV[2])
local changes = cjson.decode(ARGV[3])
for field, change in pairs(changes) do
  local stored = redis.call('HGET', state_key, field)
  if stored ~= change[1] then return 0 end
end
for field, change in pairs(changes) do
  if change[2] == false then
    redis.call('HDEL', state_key, field)
  else
    redis.call('HSET', state_key, field, change[2])
  end
end
local queued, held = 0, redis.call('HLEN', deliveries_key)
for i = 4, #ARGV - 1, 2 do
  local id = ARGV[i]
  if redis.call('HEXISTS', deliveries_key, id) == 0 then
    if held >= most then
      redis.call('HINCRBY', stats_key, 'dropped_full', 1)
    else
      redis.call('HSET', deliveries_key, id, ARGV[i + 1])
      redis.call('ZADD', due_key, now, id)
      held, queued = held + 1, queued + 1
    end
  end
end
if queued > 0 then redis.call('HINCRBY', stats_key, 'queued', queued) end
return {1, queued}
