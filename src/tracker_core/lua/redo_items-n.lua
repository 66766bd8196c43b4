--[[ redo_items: re-queue items on purpose (an admin's redo): done ones, and ones the Bloom
filter has seen that are nowhere now. The one way in that bypasses the filter.

KEYS[1] settings  KEYS[2] done (set)  KEYS[3] out (zset)  KEYS[4] claims (hash)  KEYS[5] dead (hash)
KEYS[6] todo  KEYS[7] todo:backfeed  KEYS[8] todo:secondary  KEYS[9] todo:redo
KEYS[10] todo:limited (zset of "LIMIT\0ITEM")  KEYS[11] todo:limited_in (set, held items on
their way in)  KEYS[12] limits_ready (zset)  KEYS[13] limits (hash)
KEYS[14] offloading (set: items on their way to a segment file)
KEYS[15] segments (hash: segment number -> items; field '#next' numbers them)
KEYS[16] stats (hash)  KEYS[17] target queue (set)  KEYS[18] todo:d (set of downloaders with a
queue of their own)  KEYS[19 .. 18+D] every downloader's own queue, as todo:d lists them
ARGV[1] the settings age the caller classified the items at, or '' (no check)
ARGV[2] downloader owning the target queue, or ''
ARGV[3] '1': re-queue a seen name found nowhere even when the project has segment files
ARGV[4] D, then ARGV[5 .. 4+D] the downloaders whose queues are KEYS[19 ..], in that order
then triples: item name, "LIMIT\0ITEM" when a limit matches it or '', '1' when the filter has
seen it (the caller asks the filter: a bit once set stays set) or '0'

Returns {code, settings_age, from_done, from_seen, held, out, queued, dead, offloaded,
not_seen, maybe_offloaded}; code 200, or (nothing changed) -1 unknown project, -2 ARGV[1] is
not the settings age (the limits may have changed: the caller reclassifies and calls again),
-3 todo:d is not the D downloaders given (the caller reads it again), -4 the triples are not whole.

Per name, in this order:
- done: leaves `done` for the target (or its limit's way-in set), and items_done drops by one,
  so items_done stays the done set plus what was discarded or offloaded;
- out, dead, queued (any todo queue, the target, held by any limit, on its way to a segment):
  left where it is, counted under its place;
- found nowhere and never seen by the filter: left out (not_seen: `tracker items add` queues it);
- found nowhere but seen (a done item of done_mode=discard, an item cleared from a queue, one
  dropped by backfeed dedup): queued, bypassing the filter, unless the project has registered
  segment files and ARGV[3] is not '1' (maybe_offloaded: it may sit in one, and would then be
  in two places).
Held entries of a name are looked up under every limit that can hold items (as item_status
does), so the work per name found nowhere is bounded by the number of limits.
Everything that can fail is read before the first write: the types of every key the loop reads
or writes. Writes are per item (no unpack).
]]
--@include counters
--@include enqueue
local age = redis.call('HGET', KEYS[1], 'settings_age')
if not age then return {-1, 0} end
if ARGV[1] ~= '' and ARGV[1] ~= age then return {-2, age} end
local d = tonumber(ARGV[4])
if not d or d < 0 or d ~= math.floor(d) or 4 + d > #ARGV or 18 + d ~= #KEYS then
  return {-4, age}
end
local first = 5 + d
if (#ARGV - first + 1) % 3 ~= 0 then return {-4, age} end
if redis.call('SCARD', KEYS[18]) ~= d then return {-3, age} end
for i = 1, d do
  if redis.call('SISMEMBER', KEYS[18], ARGV[4 + i]) == 0 then return {-3, age} end
end

-- Types of every key read or written below: a wrong one fails here, before anything moved.
redis.call('SCARD', KEYS[2])
redis.call('ZCARD', KEYS[3])
redis.call('HLEN', KEYS[4])
redis.call('HLEN', KEYS[5])
for q = 6, 9 do redis.call('SCARD', KEYS[q]) end
local held_any = redis.call('ZCARD', KEYS[10]) > 0
local arriving = redis.call('SCARD', KEYS[11]) > 0
redis.call('ZCARD', KEYS[12])
redis.call('HLEN', KEYS[13])
redis.call('SCARD', KEYS[14])
local segments = redis.call('HLEN', KEYS[15]) - redis.call('HEXISTS', KEYS[15], '#next')
redis.call('HLEN', KEYS[16])
check_enqueue_keys(KEYS[17], KEYS[11])
for i = 1, d do redis.call('SCARD', KEYS[18 + i]) end
local unsure = segments > 0 and ARGV[3] ~= '1'

local limit_names = nil        -- read once, when a name found nowhere needs them
local function held(item)
  if not held_any and not arriving then return false end
  if limit_names == nil then
    limit_names = {}
    local seen = {}
    for _, name in ipairs(redis.call('ZRANGE', KEYS[12], 0, -1)) do
      limit_names[#limit_names + 1] = name
      seen[name] = true
    end
    for _, name in ipairs(redis.call('HKEYS', KEYS[13])) do
      if not seen[name] then limit_names[#limit_names + 1] = name end
    end
  end
  for _, limit in ipairs(limit_names) do
    local entry = limit .. '\0' .. item
    if (held_any and redis.call('ZSCORE', KEYS[10], entry))
        or (arriving and redis.call('SISMEMBER', KEYS[11], entry) == 1) then
      return true
    end
  end
  return false
end
local function queued(item)
  if redis.call('SISMEMBER', KEYS[17], item) == 1 then return true end
  for q = 6, 9 do
    if redis.call('SISMEMBER', KEYS[q], item) == 1 then return true end
  end
  for i = 1, d do
    if redis.call('SISMEMBER', KEYS[18 + i], item) == 1 then return true end
  end
  return held(item)
end

local n = {from_done = 0, from_seen = 0, held = 0, out = 0, queued = 0, dead = 0, offloaded = 0,
           not_seen = 0, maybe_offloaded = 0}
local to_target = 0
local function requeue(item, entry)
  if enqueue_or_hold(KEYS[17], KEYS[11], item, entry) then
    to_target = to_target + 1
  else
    n.held = n.held + 1
    -- A held entry joins the way-in set: later copies of the name in this call find it there.
    arriving = true
  end
end
for i = first, #ARGV - 2, 3 do
  local item, entry, seen = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('SREM', KEYS[2], item) == 1 then
    requeue(item, entry)
    n.from_done = n.from_done + 1
  elseif redis.call('HEXISTS', KEYS[4], item) == 1 or redis.call('ZSCORE', KEYS[3], item) then
    n.out = n.out + 1
  elseif redis.call('HEXISTS', KEYS[5], item) == 1 then
    n.dead = n.dead + 1
  elseif queued(item) then
    n.queued = n.queued + 1
  elseif redis.call('SISMEMBER', KEYS[14], item) == 1 then
    n.offloaded = n.offloaded + 1
  elseif seen ~= '1' then
    n.not_seen = n.not_seen + 1
  elseif unsure then
    n.maybe_offloaded = n.maybe_offloaded + 1
  else
    requeue(item, entry)
    n.from_seen = n.from_seen + 1
  end
end
if to_target > 0 and ARGV[2] ~= '' then redis.call('SADD', KEYS[18], ARGV[2]) end
bump(KEYS[16], nil, 'items_done', -n.from_done)
bump(KEYS[16], nil, 'items_redone', n.from_done + n.from_seen)
return {200, age, n.from_done, n.from_seen, n.held, n.out, n.queued, n.dead, n.offloaded,
        n.not_seen, n.maybe_offloaded}
