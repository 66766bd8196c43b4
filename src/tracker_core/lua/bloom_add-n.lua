--[[ bloom_add: queue the items of a batch that the project's Bloom filter has never seen.

Test and set happen in this one script, so an item is never marked seen without being queued
and two callers with overlapping batches queue each item exactly once.

KEYS[1] settings  KEYS[2] target queue (set)  KEYS[3] stats  KEYS[4] bloom (geometry and counts)
KEYS[5] todo:d (downloaders with a queue of their own)  KEYS[6] backfeed_secrets
KEYS[7] backfeed_shards  KEYS[8] todo:limited (held items, counted by the bound)
KEYS[9] the other set the bound counts: todo:limited_in when KEYS[2] is backfeed's queue, that
queue when KEYS[2] is todo:limited_in (so both halves of a post see the same total)
KEYS[10...] bitmaps of every layer's chunks, as the caller's plan lists them; a fingerprint
filter's then end with each layer's stash (a set), layer 1's first: KEYS[#KEYS - L + l]
ARGV[1] layers the caller planned for  ARGV[2] capacity of the last layer
ARGV[3] downloader owning the target queue, or ''   ARGV[4] secret digest to check, or '' (admin)
ARGV[5] shard name, or '' (counted in KEYS[7]; a new name once MAX_SHARDS are known counts
under 'other')   ARGV[6] counter field for new items   ARGV[7] field for seen items
ARGV[8] number of items N   ARGV[9] bound: most items KEYS[2], KEYS[8] and KEYS[9] may hold
together once this batch is in, or 0 for none (backfeed passes it)
ARGV[10] the filter's kind as the caller planned it ('layered', 'wide' or 'fingerprint'; a
blocked fingerprint filter's with its block: 'fingerprint:16')
ARGV[11 .. 10+L] per layer: k (bits per item), or a fingerprint's bytes
then per item the entry to queue and per layer: the KEYS index of its chunk and its k positions;
or, in a fingerprint filter, the KEYS index of its chunk, the first and last byte offsets of its
two buckets (text: Redis takes them as they came) and its fingerprint; in a blocked one, the first
byte offset of its lower bucket and the last of its higher one (text), its fingerprint, and 4
bytes: how many buckets the higher lies past the lower, then its chunk's KEYS index (3 bytes).

Returns {0, new, seen}; {-1, 0, 0} unknown project; {-2, 0, 0} the filter has another number of
layers or another kind than planned (the caller reloads the geometry and retries); {-3, 0, 0} wrong secret;
{-4, 0, 0} the bound would be passed by this batch's new items (nothing is set or queued: the
caller answers "retry later", and the same items can come back once the queue drained);
{-5, cut, 0} the batch's new items would pass the last layer's capacity (nothing is set or
queued): the caller sends its first CUT items, which fill the layer, then the rest.
New items are set in the last layer; when it reaches its capacity the filter gets one more layer.
A fingerprint goes into the emptier of its two buckets (a bucket's slots fill in order; an empty
slot is all zeros, and a stored fingerprint never starts or ends with a zero byte, so the first
run of zeros of a slot's size is the first empty slot); when both are full, into the layer's
stash as "<first offset> <second offset> <fingerprint>", which is looked at only then (buckets
never empty, so an item whose buckets have room was never stashed). In a blocked filter an item's
two buckets lie in one block: one GETRANGE reads from the lower to the higher, and a new item's
fingerprint is written by one SETRANGE at the lower's offset (the span up to its slot, itself);
its stash member is "<lower's first offset> <higher's last offset> <fingerprint>".
Everything that can fail comes before the first bit is set (the places written are read first,
so a wrong type fails there): Redis keeps a failed script's writes, and an item marked seen but
not queued could never come back through the filter.
Reply codes by name: scripts.bloom_add.codes (Python callers compare against those names).
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
local BUCKET_SLOTS = 8
if redis.call('EXISTS', settings_key) == 0 then return {-1, 0, 0} end
if ARGV[4] ~= '' and redis.call('HEXISTS', secrets_key, ARGV[4]) == 0 then return {-3, 0, 0} end
local layers = tonumber(ARGV[1])
local stored = redis.call('HMGET', bloom_key, 'layers', 'kind', 'items', 'n:' .. ARGV[1] - 1, 'block')
local kind = stored[2] or 'layered'   -- filters made before kinds are layered
local planned = kind   -- fingerprint filters made before blocks have none: independent pairs
if stored[5] then planned = kind .. ':' .. stored[5] end
if tonumber(stored[1] or '1') ~= layers or planned ~= ARGV[10] then return {-2, 0, 0} end
-- Every counter the end of the script increments is read here: a damaged one (not an integer,
-- or stats not a hash) must fail before the first bit is set, not after.
local function counters_fine(values)
  for i = 1, #values do
    local v = values[i]
    if v and not string.find(v, '^%-?%d+$') then return false end
  end
  return true
end
local counts = redis.call('HMGET', stats_key, ARGV[6], ARGV[7])
if not counters_fine({stored[3], stored[4], counts[1], counts[2]}) then
  return redis.error_reply('bloom_add: a counter of the filter or the stats is not an integer')
end
local fingerprints = kind == 'fingerprint'
local blocked = fingerprints and stored[5] ~= false
local n = tonumber(ARGV[8])
-- The last layer's capacity is read after the items are queued: check it here, before any write.
local capacity = tonumber(ARGV[2])
if not capacity then
  return redis.error_reply('bloom_add: ARGV[2] (the last layer\'s capacity) must be a number')
end
local bound = tonumber(ARGV[9]) or 0
local ks, skips = {}, {}
local per_item = 1   -- ARGV strings per item: the entry, then each layer's
for l = 1, layers do
  ks[l] = tonumber(ARGV[10 + l])
  if not ks[l] or ks[l] < 1 or (fingerprints and ks[l] > 8) then
    return redis.error_reply('bloom_add: ARGV[' .. (10 + l) ..
                             '] must be k, or a fingerprint\'s 1 to 8 bytes')
  end
  skips[l] = per_item   -- where layer l's strings start within an item's
  if blocked then
    per_item = per_item + 4
  elseif fingerprints then
    per_item = per_item + 6
  else
    per_item = per_item + 1 + ks[l]
  end
end
local first = 11 + layers
if #ARGV ~= first - 1 + n * per_item then
  return redis.error_reply('bloom_add: ARGV holds ' .. #ARGV .. ' strings, not ' ..
                           (first - 1 + n * per_item))
end
local function at(item, l) return first + (item - 1) * per_item + skips[l] end

-- Bits. One BITFIELD call tests (GET) or tests and sets (SET, which answers each bit's old
-- value) the bits of many items in one layer: its ops are grouped per item, in the batch's
-- order, so a name repeated in the batch finds the bits its first copy set. A bit operation
-- costs far less as one op among thousands than as a command of its own. The positions are the
-- caller's text, handed to Redis as they came (a Lua number would be printed with %.17g).
-- Calls stay under Lua's 8,000 values per unpack. ITEMS lists item numbers (1-based); answers
-- ALL[item] = true when every one of the item's k bits was 1 before the call.
local MAX_ARGS = 7000
local function bits(items, l, write, all)
  local k = ks[l]
  local cmd, op, per_op = 'BITFIELD_RO', 'GET', 3
  if write then cmd, op, per_op = 'BITFIELD', 'SET', 4 end
  local groups, order = {}, {}   -- chunk's KEYS index -> item numbers, in the batch's order
  for _, item in ipairs(items) do
    local chunk = ARGV[at(item, l)]
    local group = groups[chunk]
    if not group then group = {}; groups[chunk] = group; order[#order + 1] = chunk end
    group[#group + 1] = item
  end
  local step = math.max(1, math.floor(MAX_ARGS / (per_op * k)))
  if write and (#order > 1 or #items > step) then
    -- Several calls: a chunk of the wrong type must fail before the first of them writes.
    for _, chunk in ipairs(order) do redis.call('STRLEN', KEYS[tonumber(chunk)]) end
  end
  for _, chunk in ipairs(order) do
    local group, key = groups[chunk], KEYS[tonumber(chunk)]
    for from = 1, #group, step do
      local to = math.min(#group, from + step - 1)
      local args, s = {}, 0
      for g = from, to do
        local i = at(group[g], l)
        for j = i + 1, i + k do
          args[s + 1] = op; args[s + 2] = 'u1'; args[s + 3] = ARGV[j]
          if write then args[s + 4] = '1' end
          s = s + per_op
        end
      end
      local old = redis.call(cmd, key, unpack(args, 1, s))
      local r = 0
      for g = from, to do
        local set = true
        for j = r + 1, r + k do
          if old[j] == 0 then set = false break end
        end
        all[group[g]] = set
        r = r + k
      end
    end
  end
end

-- Fingerprints. Two GETRANGEs read an item's buckets; a new item's bucket is written back whole
-- by one SETRANGE at its first offset (text from the caller, like the GETRANGE offsets).
local find, sub, rep = string.find, string.sub, string.rep
local empties = {}   -- an empty slot of each layer
for l = 1, layers do empties[l] = rep('\0', ks[l]) end
-- Look ITEM up in layer L; with WRITE, add it when absent. Answers whether it was there. (The
-- hottest loop of backfeed: written out, without helper calls.)
local function fingerprint(item, l, write, key)
  local i, size = first + (item - 1) * per_item + skips[l], ks[l]
  local fp = ARGV[i + 5]
  key = key or KEYS[tonumber(ARGV[i])]
  local b1 = redis.call('GETRANGE', key, ARGV[i + 1], ARGV[i + 2])
  local hit = find(b1, fp, 1, true)
  while hit and (hit - 1) % size ~= 0 do hit = find(b1, fp, hit + 1, true) end   -- a whole slot
  if hit then return true end
  local b2 = redis.call('GETRANGE', key, ARGV[i + 3], ARGV[i + 4])
  hit = find(b2, fp, 1, true)
  while hit and (hit - 1) % size ~= 0 do hit = find(b2, fp, hit + 1, true) end
  if hit then return true end
  local bytes, empty = size * BUCKET_SLOTS, empties[l]
  -- Zeros past the bitmap's end are empty slots (and never match: a fingerprint's ends aren't 0).
  if #b1 < bytes then b1 = b1 .. rep('\0', bytes - #b1) end
  if #b2 < bytes then b2 = b2 .. rep('\0', bytes - #b2) end
  local f1, f2 = find(b1, empty, 1, true), find(b2, empty, 1, true)
  if not f1 and not f2 then
    local stash, member = KEYS[#KEYS - layers + l], ARGV[i + 1] .. ' ' .. ARGV[i + 3] .. ' ' .. fp
    if redis.call('SISMEMBER', stash, member) == 1 then return true end
    if write then redis.call('SADD', stash, member) end
    return false
  end
  if write then
    local from, b, f = ARGV[i + 1], b1, f1
    if f2 and (not f1 or f2 < f1) then from, b, f = ARGV[i + 3], b2, f2 end
    redis.call('SETRANGE', key, from, sub(b, 1, f - 1) .. fp .. sub(b, f + size))
  end
  return false
end

-- A blocked filter's ITEM in layer L, as fingerprint's. One GETRANGE reads its lower bucket, the
-- buckets between and its higher one; the fewest C calls (each costs far more than Lua's own
-- steps): find the fingerprint once over the span, keeping only whole slots of the two buckets.
local byte = string.byte
local function in_block(item, l, write, key, gap)
  local i, size = first + (item - 1) * per_item + skips[l], ks[l]
  local low, high, fp = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if not key then
    local k1, k2, k3
    gap, k1, k2, k3 = byte(ARGV[i + 3], 1, 4)
    key = KEYS[k1 * 65536 + k2 * 256 + k3]
  end
  local bucket = size * BUCKET_SLOTS
  local span = redis.call('GETRANGE', key, low, high)
  local bytes = (gap + 1) * bucket
  -- Zeros past the bitmap's end are empty slots (and never match: a fingerprint's ends aren't 0).
  if #span < bytes then span = span .. rep('\0', bytes - #span) end
  local upper = bytes - bucket + 1   -- where the higher bucket starts
  local hit = find(span, fp, 1, true)
  while hit do
    if hit < upper then
      if hit <= bucket and (hit - 1) % size == 0 then return true end
    elseif (hit - upper) % size == 0 then
      return true
    end
    hit = find(span, fp, hit + 1, true)
  end
  local empty, f2 = empties[l], nil
  local f1 = find(span, empty, 1, true)
  if f1 and f1 > bucket then f1 = nil end   -- the lower bucket is full: a later bucket's slot
  if f1 ~= 1 then f2 = find(span, empty, upper, true) end   -- an empty lower one takes it anyway
  if not f1 and not f2 then
    local stash, member = KEYS[#KEYS - layers + l], low .. ' ' .. high .. ' ' .. fp
    if redis.call('SISMEMBER', stash, member) == 1 then return true end
    if write then redis.call('SADD', stash, member) end
    return false
  end
  if write then
    -- The emptier bucket (the lower on a tie) takes it: the span up to its slot, then it.
    local f = f1
    if not f1 or (f2 and f2 - upper < f1 - 1) then f = f2 end
    if f == 1 then
      redis.call('SETRANGE', key, low, fp)
    else
      redis.call('SETRANGE', key, low, sub(span, 1, f - 1) .. fp)
    end
  end
  return false
end

local chunk_keys, gaps = {}, {}   -- the write pass's items: chunk key (and gap when blocked)
-- ALL[item] = whether each of ITEMS was in layer L (with WRITE, in the last layer: added if not).
local function look(items, l, write, all)
  if not fingerprints then return bits(items, l, write, all) end
  if write then
    -- A chunk or stash of the wrong type must fail before the first item is written: read
    -- every chunk (a filter has few: one per layer up to 30 million items) and the stash.
    for key = 10, #KEYS - layers do redis.call('STRLEN', KEYS[key]) end
    redis.call('SCARD', KEYS[#KEYS - layers + l])
    -- Each item's chunk key (and gap) as the check before this pass found them.
    if blocked then
      for _, item in ipairs(items) do all[item] = in_block(item, l, true, chunk_keys[item], gaps[item]) end
    else
      for _, item in ipairs(items) do all[item] = fingerprint(item, l, true, chunk_keys[item]) end
    end
    return
  end
  local one = fingerprint
  if blocked then one = in_block end
  for _, item in ipairs(items) do all[item] = one(item, l, false) end
end

-- Whether each item is in some layer (FOUND[item]); tests the last layer too unless SKIP_LAST.
local function found_in(items, skip_last)
  local found = {}
  local last = layers
  if skip_last then last = layers - 1 end
  for l = 1, last do
    local left = {}
    for _, item in ipairs(items) do if not found[item] then left[#left + 1] = item end end
    if #left == 0 then break end
    local all = {}
    look(left, l, false, all)
    for _, item in ipairs(left) do if all[item] then found[item] = true end end
  end
  return found
end

local everyone = {}
for item = 1, n do everyone[item] = item end
local size = redis.call('SCARD', target_key)
if ARGV[3] ~= '' then redis.call('SCARD', owners_key) end
-- Anyone with the secret names shards: past MAX_SHARDS distinct names a new one is counted
-- under 'other', so backfeed_shards stays small (decided here, before the first write).
local shard = ARGV[5]
if shard ~= '' then
  local count = redis.call('HGET', shards_key, shard)
  if not count and redis.call('HLEN', shards_key) >= MAX_SHARDS then
    shard = 'other'
    count = redis.call('HGET', shards_key, shard)
  end
  if not counters_fine({count}) then
    return redis.error_reply('bloom_add: the shard\'s count is not an integer')
  end
end
local found   -- the read-only pass over the whole batch, made only near the bound or capacity
if bound > 0 then
  size = size + redis.call('ZCARD', limited_key) + redis.call('SCARD', counted_key)
  if size + n > bound then
    -- Near the bound only: count what this batch would add (a read-only pass; copies of one
    -- new key count twice, which errs on the safe side), so seen items still pass.
    local fresh = 0
    found = found_in(everyone, false)
    for item = 1, n do if not found[item] then fresh = fresh + 1 end end
    if size + fresh > bound then return {-4, 0, 0} end
  end
end
-- A layer grows only after a batch: one that would pass the last layer's capacity is sent back
-- cut where its new items fill the layer ({-5, items to send first, 0}), so no layer takes more
-- than it was sized for (a bit layer past it saturates and calls every new name seen).
local filled = tonumber(stored[4] or '0')
if filled + n > capacity then
  local fresh = 0
  found = found or found_in(everyone, false)
  for item = 1, n - 1 do
    if not found[item] then
      fresh = fresh + 1
      if filled + fresh >= capacity then return {-5, item, 0} end
    end
  end
end
-- Items found in an older layer are seen; the others are tested and set in the last layer in
-- one pass (its first write: every check is above).
local candidates = everyone
if layers > 1 then
  local old = found_in(everyone, true)
  candidates = {}
  for item = 1, n do if not old[item] then candidates[#candidates + 1] = item end end
end
-- The last layer's pass writes item by item (fingerprints) or a chunk at a time (bits), so an
-- item whose chunk is no chunk (a fixed key, a stash, past KEYS) would fail it half-way, or write
-- where no chunk is, the items before it marked seen and never queued: each candidate's chunk is
-- checked here, before that first write, and kept for the pass (a blocked item's gap with it, so
-- the check costs the pass no second decoding). Offsets and bit positions are not checked (one
-- check per number cost a fifth of a new item): Redis refuses a bad one, and they come from the
-- same hash as the chunk.
local last_chunk, base = #KEYS, first + skips[layers] - per_item
if fingerprints then last_chunk = #KEYS - layers end
for c = 1, #candidates do
  local item = candidates[c]
  local i, index = base + item * per_item, nil
  if blocked then
    local gap, k1, k2, k3 = byte(ARGV[i + 3], 1, 4)
    if k3 then index = k1 * 65536 + k2 * 256 + k3 end
    gaps[item] = gap
  else
    index = tonumber(ARGV[i])
  end
  if not index or index < 10 or index > last_chunk or index % 1 ~= 0 then
    return redis.error_reply('bloom_add: item ' .. item .. '\'s chunk is not one of KEYS[10..' ..
                             last_chunk .. ']')
  end
  chunk_keys[item] = KEYS[index]
end
local was_set = {}
look(candidates, layers, true, was_set)
local new, to_queue = 0, {}
for _, item in ipairs(candidates) do
  if not was_set[item] then
    new = new + 1
    to_queue[#to_queue + 1] = ARGV[first + (item - 1) * per_item]
    if #to_queue >= 1000 then redis.call('SADD', target_key, unpack(to_queue)) to_queue = {} end
  end
end
if #to_queue > 0 then redis.call('SADD', target_key, unpack(to_queue)) end
local seen = n - new
if new > 0 then
  local layer_filled = redis.call('HINCRBY', bloom_key, 'n:' .. (layers - 1), new)
  redis.call('HINCRBY', bloom_key, 'items', new)
  if layer_filled >= capacity then redis.call('HSET', bloom_key, 'layers', layers + 1) end
  if ARGV[3] ~= '' then redis.call('SADD', owners_key, ARGV[3]) end
end
if shard ~= '' then redis.call('HINCRBY', shards_key, shard, n) end
bump(stats_key, nil, ARGV[6], new)
bump(stats_key, nil, ARGV[7], seen)
return {0, new, seen}
