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
Reply codes by name: scripts.redo_items.codes (Python callers compare against those names).
]]
--@include counters
--@include enqueue
local settings_key     = KEYS[1]
local done_key         = KEYS[2]
local out_key          = KEYS[3]
local claims_key       = KEYS[4]
local dead_key         = KEYS[5]
local limited_key      = KEYS[10]
local limited_in_key   = KEYS[11]
local limits_ready_key = KEYS[12]
local limits_key       = KEYS[13]
local offloading_key   = KEYS[14]
local segments_key     = KEYS[15]
local stats_key        = KEYS[16]
local target_key       = KEYS[17]
local owners_key       = KEYS[18]
local FIRST_QUEUE, LAST_QUEUE = 6, 9  -- KEYS[6..9]: todo, backfeed, secondary, redo
local FIRST_OWN_QUEUE = 19  -- KEYS[19 ..]: the downloaders' own queues, as todo:d lists them
local age = redis.call('HGET', settings_key, 'settings_age')
if not age then return {-1, 0} end
if ARGV[1] ~= '' and ARGV[1] ~= age then return {-2, age} end
local d = tonumber(ARGV[4])
if not d or d < 0 or d ~= math.floor(d) or 4 + d > #ARGV or FIRST_OWN_QUEUE - 1 + d ~= #KEYS then
  return {-4, age}
end
local first = 5 + d
if (#ARGV - first + 1) % 3 ~= 0 then return {-4, age} end
if redis.call('SCARD', owners_key) ~= d then return {-3, age} end
for i = 1, d do
  if redis.call('SISMEMBER', owners_key, ARGV[4 + i]) == 0 then return {-3, age} end
end

-- Types of every key read or written below: a wrong one fails here, before anything moved.
redis.call('SCARD', done_key)
redis.call('ZCARD', out_key)
redis.call('HLEN', claims_key)
redis.call('HLEN', dead_key)
for q = FIRST_QUEUE, LAST_QUEUE do redis.call('SCARD', KEYS[q]) end
local held_any = redis.call('ZCARD', limited_key) > 0
local arriving = redis.call('SCARD', limited_in_key) > 0
redis.call('ZCARD', limits_ready_key)
redis.call('HLEN', limits_key)
redis.call('SCARD', offloading_key)
local segments = redis.call('HLEN', segments_key) - redis.call('HEXISTS', segments_key, '#next')
redis.call('HLEN', stats_key)
check_enqueue_keys(target_key, limited_in_key)
for i = 1, d do redis.call('SCARD', KEYS[FIRST_OWN_QUEUE - 1 + i]) end
local unsure = segments > 0 and ARGV[3] ~= '1'

local limit_names = nil        -- read once, when a name found nowhere needs them
local function held(item)
  if not held_any and not arriving then return false end
  if limit_names == nil then
    limit_names = {}
    local seen = {}
    for _, name in ipairs(redis.call('ZRANGE', limits_ready_key, 0, -1)) do
      limit_names[#limit_names + 1] = name
      seen[name] = true
    end
    for _, name in ipairs(redis.call('HKEYS', limits_key)) do
      if not seen[name] then limit_names[#limit_names + 1] = name end
    end
  end
  for _, limit in ipairs(limit_names) do
    local entry = limit .. '\0' .. item
    if (held_any and redis.call('ZSCORE', limited_key, entry))
        or (arriving and redis.call('SISMEMBER', limited_in_key, entry) == 1) then
      return true
    end
  end
  return false
end
local function queued(item)
  if redis.call('SISMEMBER', target_key, item) == 1 then return true end
  for q = FIRST_QUEUE, LAST_QUEUE do
    if redis.call('SISMEMBER', KEYS[q], item) == 1 then return true end
  end
  for i = 1, d do
    if redis.call('SISMEMBER', KEYS[FIRST_OWN_QUEUE - 1 + i], item) == 1 then return true end
  end
  return held(item)
end

local n = {from_done = 0, from_seen = 0, held = 0, out = 0, queued = 0, dead = 0, offloaded = 0,
           not_seen = 0, maybe_offloaded = 0}
local to_target = 0
local function requeue(item, entry)
  if enqueue_or_hold(target_key, limited_in_key, item, entry) then
    to_target = to_target + 1
  else
    n.held = n.held + 1
    -- A held entry joins the way-in set: later copies of the name in this call find it there.
    arriving = true
  end
end
for i = first, #ARGV - 2, 3 do
  local item, entry, seen = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('SREM', done_key, item) == 1 then
    requeue(item, entry)
    n.from_done = n.from_done + 1
  elseif redis.call('HEXISTS', claims_key, item) == 1 or redis.call('ZSCORE', out_key, item) then
    n.out = n.out + 1
  elseif redis.call('HEXISTS', dead_key, item) == 1 then
    n.dead = n.dead + 1
  elseif queued(item) then
    n.queued = n.queued + 1
  elseif redis.call('SISMEMBER', offloading_key, item) == 1 then
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
if to_target > 0 and ARGV[2] ~= '' then redis.call('SADD', owners_key, ARGV[2]) end
bump(stats_key, nil, 'items_done', -n.from_done)
bump(stats_key, nil, 'items_redone', n.from_done + n.from_seen)
return {200, age, n.from_done, n.from_seen, n.held, n.out, n.queued, n.dead, n.offloaded,
        n.not_seen, n.maybe_offloaded}
