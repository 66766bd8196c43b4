--[[ bloom_add: queue the items of a batch that the project's Bloom filter has never seen.

Test and set happen in this one script, so an item is never marked seen without being queued
and two callers with overlapping batches queue each item exactly once.

KEYS[1] settings  KEYS[2] target queue (set)  KEYS[3] stats  KEYS[4] bloom (geometry and counts)
KEYS[5] todo:d (downloaders with a queue of their own)  KEYS[6] backfeed_secrets
KEYS[7] backfeed_shards  KEYS[8...] bitmaps of every layer's chunks, as the caller's plan lists them
ARGV[1] layers the caller planned for  ARGV[2] capacity of the last layer
ARGV[3] downloader owning the target queue, or ''   ARGV[4] secret digest to check, or '' (admin)
ARGV[5] shard name, or ''   ARGV[6] counter field for new items   ARGV[7] field for seen items
ARGV[8] number of items N   ARGV[9 .. 8+L] k (bits per item) of each of the L layers
then per item: the entry to queue, and per layer the KEYS index of its chunk and its k positions.

Returns {0, new, seen}; {-1, 0, 0} unknown project; {-2, 0, 0} the filter has another number of
layers than planned (the caller reloads the geometry and retries); {-3, 0, 0} wrong secret.
New items are set in the last layer; when it reaches its capacity the filter gets one more layer.
]]
--@include counters
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0, 0} end
if ARGV[4] ~= '' and redis.call('HEXISTS', KEYS[6], ARGV[4]) == 0 then return {-3, 0, 0} end
local layers = tonumber(ARGV[1])
local current = tonumber(redis.call('HGET', KEYS[4], 'layers') or '1')
if current ~= layers then return {-2, 0, 0} end
local n = tonumber(ARGV[8])
local ks = {}
for l = 1, layers do ks[l] = tonumber(ARGV[8 + l]) end
local last_k = ks[layers]
local new, seen = 0, 0
local to_queue = {}
local set_args = {}
local i = 9 + layers
for _ = 1, n do
  local entry = ARGV[i]
  i = i + 1
  local found = false
  local last_chunk, last_start
  for l = 1, layers do
    local chunk = KEYS[tonumber(ARGV[i])]
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
    if #to_queue >= 1000 then redis.call('SADD', KEYS[2], unpack(to_queue)) to_queue = {} end
  end
end
if #to_queue > 0 then redis.call('SADD', KEYS[2], unpack(to_queue)) end
if new > 0 then
  local filled = redis.call('HINCRBY', KEYS[4], 'n:' .. (layers - 1), new)
  redis.call('HINCRBY', KEYS[4], 'items', new)
  if filled >= tonumber(ARGV[2]) then redis.call('HSET', KEYS[4], 'layers', layers + 1) end
  if ARGV[3] ~= '' then redis.call('SADD', KEYS[5], ARGV[3]) end
end
if ARGV[5] ~= '' then redis.call('HINCRBY', KEYS[7], ARGV[5], n) end
bump(KEYS[3], nil, ARGV[6], new)
bump(KEYS[3], nil, ARGV[7], seen)
return {0, new, seen}
