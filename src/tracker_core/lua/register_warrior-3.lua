--[[ register_warrior: add a warrior to the registry, within its bounds.

KEYS[1] warriors                  hash    warrior id -> JSON record (version, ip, registered)
KEYS[2] warriors:seen             zset    warrior id -> last heartbeat (ms); ARGV[8] for a
                                          warrior registered and not heard from since
KEYS[3] registrations:ADDRESS     string  registrations from the caller's address (or IPv6 /64)
                                          in the current window; expires with the window

ARGV[1] now (ms)  ARGV[2] warrior id  ARGV[3] JSON record
ARGV[4] forget warriors silent since before this time (ms)
ARGV[5] most warriors the registry holds   ARGV[6] most registrations per address per window
ARGV[7] the throttle's window (ms)
ARGV[8] where a new warrior goes in warriors:seen: just before the online window, so it is
        listed and forgotten like the others but counted online only from its first heartbeat

Returns 1 (registered), -1 (throttled: the address registered ARGV[6] times this window) or
-2 (the registry holds ARGV[5] warriors). A refusal writes nothing but the forgetting of stale
warriors, which is what every call does first: at most 100 per call, so the registry stays
bounded without a sweep that could stall Redis, and a full registry makes room as warriors fall
silent.
Reply codes by name: scripts.register_warrior.codes (Python callers compare against those names).
]]
local warriors_key      = KEYS[1]
local seen_key          = KEYS[2]
local registrations_key = KEYS[3]
local id, record = ARGV[2], ARGV[3]
local stale = redis.call('ZRANGEBYSCORE', seen_key, '-inf', '(' .. ARGV[4], 'LIMIT', 0, 100)
if #stale > 0 then
  redis.call('ZREM', seen_key, unpack(stale))
  redis.call('HDEL', warriors_key, unpack(stale))
end
if tonumber(redis.call('GET', registrations_key) or '0') >= tonumber(ARGV[6]) then
  return -1
end
if redis.call('HLEN', warriors_key) >= tonumber(ARGV[5]) then
  return -2
end
if redis.call('INCR', registrations_key) == 1 then
  redis.call('PEXPIRE', registrations_key, ARGV[7])
end
redis.call('HSET', warriors_key, id, record)
redis.call('ZADD', seen_key, ARGV[8], id)
return 1
