--[[ bloom_add: queue the items of a batch that the project's Bloom filter has never seen.

Test and set happen in this one script, so an item is never marked seen without being queued
and two callers with overlapping batches queue each item exactly once.

KEYS[1] settings  KEYS[2] target queue (set)  KEYS[3] stats  KEYS[4] bloom (geometry and counts)
KEYS[5] todo:d (downloaders with a queue of their own)  KEYS[6] backfeed_secrets
KEYS[7] backfeed_shards  KEYS[8] todo:limited (held items, counted by the bound)
KEYS[9] the other set the bound counts: todo:limited_in when KEYS[2] is backfeed's queue, that
queue when KEYS[2] is todo:limited_in (so both halves of a post see the same total)
KEYS[10...] bitmaps of every layer's chunks, as the caller's plan lists them
ARGV[1] layers the caller planned for  ARGV[2] capacity of the last layer
ARGV[3] downloader owning the target queue, or ''   ARGV[4] secret digest to check, or '' (admin)
ARGV[5] shard name, or '' (counted in KEYS[7]; a new name once MAX_SHARDS are known counts
under 'other')   ARGV[6] counter field for new items   ARGV[7] field for seen items
ARGV[8] number of items N   ARGV[9] bound: most items KEYS[2], KEYS[8] and KEYS[9] may hold
together once this batch is in, or 0 for none (backfeed passes it)
ARGV[10 .. 9+L] k (bits per item) of each of the L layers
then per item: the entry to queue, and per layer the KEYS index of its chunk and its k positions.

Returns {0, new, seen}; {-1, 0, 0} unknown project; {-2, 0, 0} the filter has another number of
layers than planned (the caller reloads the geometry and retries); {-3, 0, 0} wrong secret;
{-4, 0, 0} the bound would be passed by this batch's new items (nothing is set or queued: the
caller answers "retry later", and the same items can come back once the queue drained).
New items are set in the last layer; when it reaches its capacity the filter gets one more layer.
Everything that can fail comes before the first bit is set (the places written are read first,
so a wrong type fails there): Redis keeps a failed script's writes, and an item marked seen but
not queued could never come back through the filter.
Reply codes by name: reply_codes.BloomAdd (Python callers compare against those names).
]]
--@include counters
--@constants MAX_SHARDS
local settings_key = KEYS[1]
local target_key   = KEYS[2]
local stats_key    = KEYS[3]
local bloom_key    = KEYS[4]
local owners_key   = KEYS[5]
local secrets_key  = KEYS[6]
local shards_key   = KEYS[7]
local limited_key  = KEYS[8]
local counted_key  = KEYS[9]
if redis.call('EXISTS', settings_key) == 0 then return {-1, 0, 0} end
if ARGV[4] ~= '' and redis.call('HEXISTS', secrets_key, ARGV[4]) == 0 then return {-3, 0, 0} end
local layers = tonumber(ARGV[1])
local current = tonumber(redis.call('HGET', bloom_key, 'layers') or '1')
if current ~= layers then return {-2, 0, 0} end
local n = tonumber(ARGV[8])
-- The last layer's capacity is read after the items are queued: check it here, before any write.
local capacity = tonumber(ARGV[2])
if not capacity then
  return redis.error_reply('bloom_add: ARGV[2] (the last layer\'s capacity) must be a number')
end
local bound = tonumber(ARGV[9]) or 0
local ks = {}
for l = 1, layers do ks[l] = tonumber(ARGV[9 + l]) end
local last_k = ks[layers]
local first = 10 + layers

-- Test item at ARGV[i]: found in some layer?, its last layer's chunk and first bit position's
-- index, and the index of the next item.
local function probe(i)
  local found = false
  local last_chunk, last_start
  i = i + 1
  for l = 1, layers do
    local chunk = KEYS[tonumber(ARGV[i])]   -- a bitmap: KEYS[10 ..]
    local k = ks[l]
    if l == layers then last_chunk, last_start = chunk, i + 1 end
    if not found then
      local all = true
      for j = i + 1, i + k do
        if redis.call('GETBIT', chunk, ARGV[j]) == 0 then all = false break end
      end
      found = all
    end
    i = i + 1 + k
  end
  return found, last_chunk, last_start, i
end

local size = redis.call('SCARD', target_key)
if ARGV[3] ~= '' then redis.call('SCARD', owners_key) end
-- Anyone with the secret names shards: past MAX_SHARDS distinct names a new one is counted
-- under 'other', so backfeed_shards stays small (decided here, before the first write).
local shard = ARGV[5]
if shard ~= '' and redis.call('HEXISTS', shards_key, shard) == 0
    and redis.call('HLEN', shards_key) >= MAX_SHARDS then
  shard = 'other'
end
if bound > 0 then
  size = size + redis.call('ZCARD', limited_key) + redis.call('SCARD', counted_key)
  if size + n > bound then
    -- Near the bound only: count what this batch would add (a read-only pass; copies of one
    -- new key count twice, which errs on the safe side), so seen items still pass.
    local fresh, i = 0, first
    for _ = 1, n do
      local found
      found, _, _, i = probe(i)
      if not found then fresh = fresh + 1 end
    end
    if size + fresh > bound then return {-4, 0, 0} end
  end
end
local new, seen = 0, 0
local to_queue = {}
local set_args = {}
local i = first
for _ = 1, n do
  local entry = ARGV[i]
  local found, last_chunk, last_start
  found, last_chunk, last_start, i = probe(i)
  if found then
    seen = seen + 1
  else
    new = new + 1
    local s = 0
    for j = last_start, last_start + last_k - 1 do
      set_args[s + 1] = 'SET'; set_args[s + 2] = 'u1'; set_args[s + 3] = ARGV[j]; set_args[s + 4] = 1
      s = s + 4
    end
    redis.call('BITFIELD', last_chunk, unpack(set_args, 1, s))
    to_queue[#to_queue + 1] = entry
    if #to_queue >= 1000 then redis.call('SADD', target_key, unpack(to_queue)) to_queue = {} end
  end
end
if #to_queue > 0 then redis.call('SADD', target_key, unpack(to_queue)) end
if new > 0 then
  local filled = redis.call('HINCRBY', bloom_key, 'n:' .. (layers - 1), new)
  redis.call('HINCRBY', bloom_key, 'items', new)
  if filled >= capacity then redis.call('HSET', bloom_key, 'layers', layers + 1) end
  if ARGV[3] ~= '' then redis.call('SADD', owners_key, ARGV[3]) end
end
if shard ~= '' then redis.call('HINCRBY', shards_key, shard, n) end
bump(stats_key, nil, ARGV[6], new)
bump(stats_key, nil, ARGV[7], seen)
return {0, new, seen}
