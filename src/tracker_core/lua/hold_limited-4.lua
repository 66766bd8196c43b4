--[[ hold_limited: move newly queued limited items from their way-in set to the held zset.

KEYS[1] todo:limited_in (set of "LIMIT\0ITEM", filled by bloom_add)  KEYS[2] todo:limited (zset)
KEYS[3] limits_ready (zset)  KEYS[4] limit_tat (hash)
ARGV[1] most entries to move in this call (1 to 100000)
Returns the number moved; -1 (nothing changed) for a bad ARGV[1]. Items wait in the way-in set
only between the two calls of an add (or after a crash between them; the next add or `tracker
maintain` moves them), and both places are counted as queued, so every item stays in exactly
one place. A limit that gets held items is made ready at the time its bucket has a token again
(kept in limit_tat while it had none).
Redis keeps the writes of a script that fails half-way, so everything that can fail is read and
checked first (the types of all four keys, the stored times) and the writes come last, in chunks
that stay far under Lua's unpack limit (about 8,000 values).
Reply codes by name: scripts.hold_limited.codes (Python callers compare against those names).
]]
local limited_in_key   = KEYS[1]
local limited_key      = KEYS[2]
local limits_ready_key = KEYS[3]
local limit_tat_key    = KEYS[4]
local CHUNK = 1000
local most = tonumber(ARGV[1])
if not most or most < 1 or most > 100000 or most ~= math.floor(most) then return -1 end
redis.call('ZCARD', limited_key)                      -- a wrong type fails here, before any write
local entries = redis.call('SRANDMEMBER', limited_in_key, most)   -- distinct members: count > 0
if #entries == 0 then return 0 end
local ready = {}      -- limit -> when its bucket next has a token, for limits not yet ready
local order = {}
for _, entry in ipairs(entries) do
  local name = string.match(entry, '^([^%z]*)%z')
  if name and ready[name] == nil and redis.call('ZSCORE', limits_ready_key, name) == false then
    local at = redis.call('HGET', limit_tat_key, name)
    ready[name] = tonumber(at) and at or 0        -- kept as stored text: no rounding
    order[#order + 1] = name
  end
end
for i = 1, #entries, CHUNK do
  local last = math.min(i + CHUNK - 1, #entries)
  local args = {}
  for j = i, last do
    args[#args + 1] = 0
    args[#args + 1] = entries[j]
  end
  redis.call('ZADD', limited_key, unpack(args))
  redis.call('SREM', limited_in_key, unpack(entries, i, last))
end
for _, name in ipairs(order) do
  redis.call('ZADD', limits_ready_key, ready[name], name)
  redis.call('HDEL', limit_tat_key, name)
end
return #entries
