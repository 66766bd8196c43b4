--[[ warrior_seen: note a registered warrior's heartbeat, and forget long-silent ones.

KEYS[1] warriors       hash  warrior id -> JSON record (version, registered, ip...)
KEYS[2] warriors:seen  zset  warrior id -> last seen (ms)

ARGV[1] now (ms)  ARGV[2] warrior id
ARGV[3] forget warriors silent since before this time (ms)

Returns 1, or 0 for a heartbeat from an id the registry does not know (the caller still
answers: a warrior must never be sent into a retry loop), which adds nothing: only
register_warrior adds warriors, within the registry's bounds. At most 100 stale warriors are
forgotten per call, so the registry stays bounded without a sweep that could stall Redis.
]]
local now, id = tonumber(ARGV[1]), ARGV[2]
if redis.call('HEXISTS', KEYS[1], id) == 0 then
  return 0
end
redis.call('ZADD', KEYS[2], now, id)
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[3], 'LIMIT', 0, 100)
if #stale > 0 then
  redis.call('ZREM', KEYS[2], unpack(stale))
  redis.call('HDEL', KEYS[1], unpack(stale))
end
return 1
