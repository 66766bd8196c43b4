--[[ hold_limited: move newly queued limited items from their way-in set to the held zset.

KEYS[1] todo:limited_in (set of "LIMIT\0ITEM", filled by bloom_add)  KEYS[2] todo:limited (zset)
KEYS[3] limits_ready (zset)  KEYS[4] limit_tat (hash)
ARGV[1] most entries to move in this call
Returns the number moved. Items wait in the way-in set only between the two calls of an add (or
after a crash between them; the next add or `tracker maintain` moves them), and both places are
counted as queued, so every item stays in exactly one place. A limit that gets held items is
made ready at the time its bucket has a token again (kept in limit_tat while it had none).
]]
local moved = redis.call('SPOP', KEYS[1], tonumber(ARGV[1]))
if #moved == 0 then return 0 end
local args, names = {}, {}
for i, entry in ipairs(moved) do
  args[2 * i - 1] = 0
  args[2 * i] = entry
  local name = string.match(entry, '^([^%z]*)%z')
  if name then names[name] = true end
end
redis.call('ZADD', KEYS[2], unpack(args))
for name in pairs(names) do
  if redis.call('ZSCORE', KEYS[3], name) == false then
    local next_at = redis.call('HGET', KEYS[4], name) or 0
    redis.call('ZADD', KEYS[3], next_at, name)
    redis.call('HDEL', KEYS[4], name)
  end
end
return #moved
