--[[ bloom_configure: fix the geometry of a project's Bloom filter while it is still empty.

KEYS[1] settings  KEYS[2] bloom
ARGV[1] capacity (items in the first layer)  ARGV[2] false-positive rate  ARGV[3] growth factor
ARGV[4] tightening ratio  ARGV[5] bits per chunk  ARGV[6] '1' to replace a configured geometry
ARGV[7] kind ('layered', 'wide' or 'fingerprint', see tracker_core.items.bloom)  ARGV[8] least bits
per item of a wide layer. A geometry stored without a kind (made before kinds) is layered.
ARGV[9] the filter's hash salt: 32 lowercase hex digits from Python's secrets (Lua has no good
randomness), stored only with a new geometry; a geometry stored without one hashes unkeyed.
Absent or '' stores none (the old callers').
ARGV[10] a fingerprint filter's buckets per block (2 to 256), stored with a new fingerprint
geometry as 'block'; absent, '' or '0' stores none: independent bucket pairs, as every
fingerprint filter made before blocks keeps (see tracker_core.items.bloom).

Returns the geometry in force as a flat field/value list; {-1} unknown project, {-2} the filter
already holds items (its bit positions depend on the geometry, so it can no longer change);
{-3} (nothing changed) when an argument is not a number, the kind is not one of those or the
salt is not 32 hex digits, or the block is not 0 or 2 to 256 or is given to another kind.
Reply codes by name: scripts.bloom_configure.codes (Python callers compare against those names).
]]
local settings_key = KEYS[1]
local bloom_key    = KEYS[2]
if redis.call('EXISTS', settings_key) == 0 then return {-1} end
for _, i in ipairs({1, 2, 3, 4, 5, 8}) do if not tonumber(ARGV[i]) then return {-3} end end
local kinds = {layered = true, wide = true, fingerprint = true}
if not kinds[ARGV[7]] then return {-3} end   -- all three before the DEL below
local salt = ARGV[9] or ''
if salt ~= '' and not string.match(salt, '^' .. string.rep('[0-9a-f]', 32) .. '$') then return {-3} end
local block = tonumber(ARGV[10] or '') or 0
if ARGV[10] and ARGV[10] ~= '' and not tonumber(ARGV[10]) then return {-3} end
if block ~= 0 and (block ~= math.floor(block) or block < 2 or block > 256 or ARGV[7] ~= 'fingerprint') then
  return {-3}
end
local fields = {'capacity', 'fp_rate', 'growth', 'tightening', 'chunk_bits'}
local configured = redis.call('EXISTS', bloom_key) == 1
if configured and ARGV[6] == '1' then
  if tonumber(redis.call('HGET', bloom_key, 'items') or '0') > 0 then return {-2} end
  redis.call('DEL', bloom_key)
  configured = false
end
if not configured then
  for i, field in ipairs(fields) do redis.call('HSET', bloom_key, field, ARGV[i]) end
  redis.call('HSET', bloom_key, 'layers', 1, 'items', 0, 'kind', ARGV[7], 'bits_per_item', ARGV[8])
  if salt ~= '' then redis.call('HSET', bloom_key, 'salt', salt) end
  if block ~= 0 then redis.call('HSET', bloom_key, 'block', block) end
end
return redis.call('HGETALL', bloom_key)
