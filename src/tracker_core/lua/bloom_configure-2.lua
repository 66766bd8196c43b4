--[[ bloom_configure: fix the geometry of a project's Bloom filter while it is still empty.

KEYS[1] settings  KEYS[2] bloom
ARGV[1] capacity (items in the first layer)  ARGV[2] false-positive rate  ARGV[3] growth factor
ARGV[4] tightening ratio  ARGV[5] bits per chunk  ARGV[6] '1' to replace a configured geometry

Returns the geometry in force as a flat field/value list; {-1} unknown project, {-2} the filter
already holds items (its bit positions depend on the geometry, so it can no longer change);
{-3} (nothing changed) when an argument is not a number.
]]
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1} end
for i = 1, 5 do if not tonumber(ARGV[i]) then return {-3} end end   -- before the DEL below
local fields = {'capacity', 'fp_rate', 'growth', 'tightening', 'chunk_bits'}
local configured = redis.call('EXISTS', KEYS[2]) == 1
if configured and ARGV[6] == '1' then
  if tonumber(redis.call('HGET', KEYS[2], 'items') or '0') > 0 then return {-2} end
  redis.call('DEL', KEYS[2])
  configured = false
end
if not configured then
  for i, field in ipairs(fields) do redis.call('HSET', KEYS[2], field, ARGV[i]) end
  redis.call('HSET', KEYS[2], 'layers', 1, 'items', 0)
end
return redis.call('HGETALL', KEYS[2])
