--[[ rollup_hour: sum one completed hour's minute counters into its hour hash, once.

KEYS[1]      hour:H      hash  the roll-up (written once; its presence means: done)
KEYS[2..61]  minute:M    hash  the 60 minutes of hour H, in order (some may not exist)

ARGV[1] expiry of the hour hash (seconds)

Returns 1 when it wrote the roll-up, 0 when the hour was already rolled up.
Minute hashes live two days, hour hashes much longer, so charts reach back weeks with 24 small
hashes a day. Callers roll up only hours that ended a few minutes ago (late writers on a slow
clock are done by then). The field `minutes` counts the minutes that had data, so an hour with
no activity still gets a (tiny) hash and is not summed again.
Reply codes by name: scripts.rollup_hour.codes (Python callers compare against those names).
]]
--@constants UNPACK_CHUNK
local hour_key = KEYS[1]
local FIRST_MINUTE = 2  -- KEYS[2..61]: the hour's minutes, in order
if redis.call('EXISTS', hour_key) == 1 then return 0 end
local totals = {}
local minutes = 0
for i = FIRST_MINUTE, #KEYS do
  local flat = redis.call('HGETALL', KEYS[i])
  if #flat > 0 then minutes = minutes + 1 end
  for j = 1, #flat, 2 do
    local field = flat[j]
    -- backlog is a sample, not a count: the hour keeps the last one seen, not a sum.
    if field == 'backlog' then
      totals[field] = tonumber(flat[j + 1])
    else
      totals[field] = (totals[field] or 0) + tonumber(flat[j + 1])
    end
  end
end
local args = {'minutes', minutes}
for field, value in pairs(totals) do
  args[#args + 1] = field
  args[#args + 1] = string.format('%d', value)
end
for i = 1, #args, UNPACK_CHUNK do          -- however many fields
  redis.call('HSET', hour_key, unpack(args, i, math.min(i + UNPACK_CHUNK - 1, #args)))
end
redis.call('EXPIRE', hour_key, tonumber(ARGV[1]))
return 1
