--[[ done: mark items completed, idempotently, and update the leaderboard counters.

KEYS[1]  settings            hash
KEYS[2]  out                 zset  item -> when it may be reclaimed (ms)
KEYS[3]  claims              hash  item -> "DOWNLOADER\tIP\tTIMES_CLAIMED\tCLAIMED_MS" (three
                                   fields: from before claim times were kept, `out` scores the
                                   claim time)
KEYS[4]  done                set
KEYS[5]  downloader_claims   hash  downloader -> claims held
KEYS[6]  log                 stream  one entry per done call with new items (archived)
KEYS[7]  downloader_count    hash  downloader -> items done
KEYS[8]  downloader_bytes    zset  downloader -> bytes (so the leaderboard is a range read)
KEYS[9]  downloader_version  hash  downloader -> last script version
KEYS[10] domain_bytes        hash  domain -> bytes
KEYS[11] stats               hash
KEYS[12] minute:M            hash
KEYS[13] todo                set
KEYS[14] todo:backfeed       set
KEYS[15] todo:secondary      set
KEYS[16] todo:redo           set
KEYS[17] todo:d:SENDER       set
KEYS[18] bad_dones           stream  dones for names that are not out (capped by count and bytes)
KEYS[19] reclaim_history     hash  earlier claim rounds of items claimed more than once
KEYS[20] dead                hash  item -> JSON history of an item reclaimed too often

ARGV[1] now (ms)  ARGV[2] downloader  ARGV[3] version  ARGV[4] id (JSON text)
ARGV[5] the sender's IP (for the log; '' when unknown)
ARGV[6] number of domains D, then D pairs (domain, bytes), then the item names.

Returns {code, settings_age, new, repeated, unknown, refused, clamped}; code 200, or -1 for an
unknown project. Every number in ARGV is checked before the first write: a Redis error and no
change when one is not a number.

One rule for every item (docs/protocol.md, "The done rules"):
- out (whoever claimed it) or dead (a late done for an item reclaimed too often): it becomes
  done and is attributed to the sender (items_done; a dead one also counts in items_dead_done);
- already done: a repeat (dones_repeated), nothing changes;
- waiting in a queue (todo, todo:backfeed, todo:secondary, todo:redo, the sender's own queue):
  nothing changes and it counts in dones_refused, unless the project's accept_queued_dones is
  on (the old tracker's behaviour), when it becomes done like a claimed item;
- found nowhere: unknown (dones_unknown), never added.
Refused and unknown names are recorded in bad_dones (field `reason`: queued or unknown), each entry
holding at most BAD_ITEMS_BYTES of the names (cut at a character boundary) and `count`, the
stream capped at BAD_DONES_MAXLEN entries: about 12 MB at most.
Bytes are shared out over the names of the call, so a repeated call adds nothing; what the new
items get is capped at max_bytes_per_item each (0: no cap; absent: DEFAULT_MAX_BYTES_PER_ITEM,
of script_constants.py), scaling every domain alike, and a clamped call counts in dones_bytes_clamped.
Every counter grown by bytes (domain_bytes, bytes_done in stats and the minute, the downloader's
score) and rtt_sum_ms stops at 2^53: read before the first write and the increment cut to fit (counted in
dones_bytes_clamped), so no HINCRBY can overflow once items moved. Only this script grows them,
and the minute's and the downloader's by the very increments of the project's total in stats,
so each is at most that total: the room of stats bounds them all, and only stats is read. (Were
stats deleted by hand, they could pass 2^53 by what they held before, never 2^63.) domain_bytes keeps at most
MAX_DOMAIN_FIELDS domains (whoever came first); a domain new once it is full counts under 'other'.
With done_mode=discard done items are only counted, not kept.
The log entry (one per call with new items) holds downloader, ip, items (NUL-joined, every one:
it is the record), bytes, domains (NUL-joined domain, bytes pairs: each domain's share for
the new items), version, id and at. `tracker maintain` archives the entries beyond log_maxlen
to segment files (tracker_core.donelog.log_archive) and only then trims them; here the stream is cut
only at a safety bound far above that (LOG_SAFETY_FACTOR x log_maxlen, at least
LOG_SAFETY_MIN), for when no maintainer runs, and what that cut drops counts in
log_entries_dropped.
RTT (claim to done) goes into a bounded histogram: field rtt_le_B counts items done within B
seconds (rtt_le_inf: the rest), in stats and in the minute hash, so percentiles need no samples;
with rtt_sum_ms for the mean. The buckets add up to the count (tracker_core.scripts.derived_counters
derives rtt_count from them; no count is stored). A call with one new item that has an RTT (most
of them) counts one field, done_one_le_B, where it counted items_done, rtt_le_B and (in stats)
done_requests: the readers add it to those three (derived_counters; rollup_day-25.lua to the
day's items).
Dead items have no current claim and add no RTT.
Reply codes by name: scripts.done.codes (Python callers compare against those names).
]]
--@include counters
--@include claim_record
--@constants RTT_BOUNDS_S DEFAULT_MAX_BYTES_PER_ITEM DEFAULT_LOG_MAXLEN MAX_DOMAIN_FIELDS
--@constants BAD_DONES_MAXLEN BAD_ITEMS_BYTES MAX_LOG_MAXLEN LOG_SAFETY_FACTOR LOG_SAFETY_MIN
-- The script makes every function anew on each run, ~1,500-2,500 instructions each, more for
-- each local of the body it captures (docs/data-model.md, "What a claim and a done cost in
-- Redis"): the one helper of the common path comes first and gets what it uses as arguments,
-- what it would take another is written out, and the bad-done helpers are made when needed.
-- Byte counters stop at 2^53: exact in a Lua double and far below HINCRBY's 2^63, whose
-- "would overflow" would fail the script after items already moved from out to done.
local BYTES_LIMIT = 2 ^ 53
-- A number goes to redis.call as its digits (string.format('%d')): a Lua number handed to
-- redis.call (or joined to a string) is printed with %.17g, about 2,000 instructions each, 7% of
-- a done when every count went so. A fraction goes as it is.
local floor, format = math.floor, string.format
-- How much a counter holding VALUE may still grow.
local function room(value)
  if not value then return BYTES_LIMIT end
  local v = tonumber(value)
  if not v or v ~= math.floor(v) then return 0 end   -- not an integer: HINCRBY would fail
  return math.max(BYTES_LIMIT - v, 0)
end
local settings_key           = KEYS[1]
local out_key                = KEYS[2]
local claims_key             = KEYS[3]
local done_key               = KEYS[4]
local downloader_claims_key  = KEYS[5]
local log_key                = KEYS[6]
local downloader_count_key   = KEYS[7]
local downloader_bytes_key   = KEYS[8]
local downloader_version_key = KEYS[9]
local domain_bytes_key       = KEYS[10]
local stats_key              = KEYS[11]
local minute_key             = KEYS[12]
local bad_dones_key          = KEYS[18]
local reclaim_history_key    = KEYS[19]
local dead_key               = KEYS[20]
local FIRST_QUEUE, LAST_QUEUE = 13, 17  -- KEYS[13..17]: every queue a done item may wait in

-- Every number first: a failure after the first write would keep half a done.
local now = tonumber(ARGV[1])
local n_domains = tonumber(ARGV[6])
if not now or not n_domains or n_domains < 0 or n_domains ~= math.floor(n_domains)
    or 6 + 2 * n_domains > #ARGV then
  return redis.error_reply('done: ARGV[1] (now, ms) and ARGV[6] (domains) must be numbers')
end
local first_item = 7 + 2 * n_domains
local now_digits = now == floor(now) and now > -1e15 and now < 1e15
local reported = {}
for d = 0, n_domains - 1 do
  local bytes = tonumber(ARGV[8 + 2 * d])
  if not bytes or bytes < 0 or bytes ~= bytes or bytes >= 1e15 then
    return redis.error_reply('done: byte counts must be numbers from 0 to 1e15')
  end
  reported[d] = bytes
end

local settings = redis.call('HMGET', settings_key, 'settings_age', 'done_mode', 'log_maxlen',
                            'accept_queued_dones', 'max_bytes_per_item')
local age = settings[1]
if not age then return {-1, 0} end
local keep_done = settings[2] ~= 'discard'
local log_maxlen = math.floor(math.min(math.max(tonumber(settings[3]) or DEFAULT_LOG_MAXLEN, 0),
                                      MAX_LOG_MAXLEN))
if log_maxlen ~= log_maxlen then log_maxlen = DEFAULT_LOG_MAXLEN end
local accept_queued = settings[4] == '1'
local max_per_item = tonumber(settings[5]) or DEFAULT_MAX_BYTES_PER_ITEM
if not (max_per_item >= 0) then max_per_item = DEFAULT_MAX_BYTES_PER_ITEM end
local downloader, version, id, ip = ARGV[2], ARGV[3], ARGV[4], ARGV[5]

-- Read pass for the counters grown by bytes (and the RTT sum), before the first write: how much
-- each may still grow (room), and which domain_bytes field each reported domain goes to.
local domain_field, field_room = {}, {}
if n_domains > 0 then
  local known, added = nil, 0
  for start = 0, n_domains - 1, 1000 do
    local names = {}
    for d = start, math.min(start + 999, n_domains - 1) do names[#names + 1] = ARGV[7 + 2 * d] end
    names[#names + 1] = 'other'   -- read with the rest: where a domain past the cap goes
    local values = redis.call('HMGET', domain_bytes_key, unpack(names))
    if field_room['other'] == nil then field_room['other'] = room(values[#names]) end
    for j = 1, #names - 1 do
      local name, d = names[j], start + j - 1
      if field_room[name] == nil then
        if values[j] then
          field_room[name] = room(values[j])
        else
          known = known or redis.call('HLEN', domain_bytes_key)
          if known + added < MAX_DOMAIN_FIELDS then
            added = added + 1
            field_room[name] = BYTES_LIMIT
          else
            name = 'other'
          end
        end
      end
      domain_field[d] = name
    end
  end
end
local stats_now = redis.call('HMGET', stats_key, 'bytes_done', 'rtt_sum_ms')
local bytes_room, rtt_room = room(stats_now[1]), room(stats_now[2])
-- Type probes (O(1)) of every key written below that nothing above has read: an item that left
-- `out` must not be stranded by a WRONGTYPE error on a later write (Redis keeps the writes).
-- domain_bytes needs none: only reported domains are written, and then the HMGET above read it.
-- With one name the five probes under `not one` are not needed: a claimed item goes to `done`
-- (SADD) before it leaves `out`, so that SADD is the script's first write and proves done's type
-- itself; any other item reaches `dead` and the queues only after SISMEMBER has read `done`, and
-- its HDEL from `dead` is then the first write; the loop reads the holder's count of claims
-- (HGET, for every name: it decides between HDEL and HINCRBY) and, for an item claimed more
-- than once, probes reclaim_history before that first write (only such an item writes it); a
-- name refused or unknown writes nothing before its entry in bad_dones (below). A second
-- name's writes follow the first's.
local total = #ARGV - first_item + 1
local one = total == 1
if not one then
  redis.call('SCARD', done_key)
  redis.call('HLEN', dead_key)
  redis.call('XLEN', bad_dones_key)
  redis.call('HLEN', downloader_claims_key)
  redis.call('HLEN', reclaim_history_key)
end
redis.call('HLEN', minute_key)
redis.call('ZCARD', downloader_bytes_key)
local log_len = redis.call('XLEN', log_key)   -- also the length the safety cut below compares
redis.call('HLEN', downloader_count_key)
-- The version the downloader last reported: written only when it changed (a read, not a write
-- and an AOF entry, on nearly every done), and the read is the key's type probe.
local version_known = version == '' or redis.call('HGET', downloader_version_key, downloader) == version

local new_items, unknown_items, refused_items = {}, {}, {}
local repeated, dead_done, rtt_sum, rtt_hist = 0, 0, 0, {}   -- rtt_hist: bucket bound -> items
for i = first_item, #ARGV do
  local item = ARGV[i]
  local scored = redis.call('ZSCORE', out_key, item)
  local found = false
  if scored then
    local claim = redis.call('HGET', claims_key, item)
    local claimed_at   -- none without a record: no RTT
    local claimant, times, held
    if claim then
      local _
      claimant, _, times, claimed_at = parse_claim(claim)
      -- A record of three fields (from before claim times were kept) or one the scripts did not
      -- write: `out` scored the claim time; the holder is what stands before the first tab.
      if not claimant then claimant, times = string.match(claim, '^[^\t]*'), 1 end
      claimed_at = claimed_at or scored
      -- Read before this item's first write (with one name, the type probes too).
      held = tonumber(redis.call('HGET', downloader_claims_key, claimant)) or 0
      if one and times > 1 then redis.call('HLEN', reclaim_history_key) end
    end
    if keep_done then redis.call('SADD', done_key, item) end   -- its new place first (above)
    redis.call('ZREM', out_key, item)
    redis.call('HDEL', claims_key, item)
    if claim then
      if times > 1 then redis.call('HDEL', reclaim_history_key, item) end
      -- The holder's last claim (the common case) takes the field away; so does a count that is
      -- not an integer HINCRBY takes (it would fail after the writes above).
      if held <= 1 or held ~= math.floor(held) or held >= BYTES_LIMIT then
        redis.call('HDEL', downloader_claims_key, claimant)
      else
        redis.call('HINCRBY', downloader_claims_key, claimant, '-1')
      end
    end
    -- Whole ms: a fractional claim time (old data) would reach HINCRBY after the first write.
    local rtt_ms = claimed_at and math.floor(now - tonumber(claimed_at))
    if rtt_ms and rtt_ms == rtt_ms and rtt_ms > -1e15 and rtt_ms < 1e15 then   -- a finite claim time
      local bucket = 'inf'
      for _, bound in ipairs(RTT_BOUNDS_S) do
        if rtt_ms <= bound * 1000 then bucket = format('%d', bound) break end
      end
      rtt_sum = rtt_sum + rtt_ms
      rtt_hist[bucket] = (rtt_hist[bucket] or 0) + 1
    end
    found = true
  elseif redis.call('SISMEMBER', done_key, item) == 1 then
    repeated = repeated + 1
  elseif redis.call('HDEL', dead_key, item) == 1 then
    -- The work was done after all: keep it rather than the verdict.
    if keep_done then redis.call('SADD', done_key, item) end
    dead_done = dead_done + 1
    found = true
  else
    local queued = false
    for q = FIRST_QUEUE, LAST_QUEUE do
      if redis.call('SISMEMBER', KEYS[q], item) == 1 then
        queued = true
        if accept_queued then
          redis.call('SREM', KEYS[q], item)
          if keep_done then redis.call('SADD', done_key, item) end
        end
        break
      end
    end
    if not queued then
      unknown_items[#unknown_items + 1] = item
    elseif accept_queued then
      found = true
    else
      refused_items[#refused_items + 1] = item
    end
  end
  if found then new_items[#new_items + 1] = item end
end

local new = #new_items
-- One item done, with an RTT (most calls): its bucket, the one field that counts the call, the
-- item and its RTT (done_one_le_B); nil otherwise.
local one_bucket = new == 1 and next(rtt_hist)
local clamped = 0
if new > 0 then
  local shares, bytes_total = {}, 0
  for d = 0, n_domains - 1 do
    shares[d] = math.floor(reported[d] * new / total)
    bytes_total = bytes_total + shares[d]
  end
  if max_per_item > 0 and bytes_total > max_per_item * new then
    local scale = max_per_item * new / bytes_total
    bytes_total = 0
    for d = 0, n_domains - 1 do
      shares[d] = math.floor(shares[d] * scale)
      bytes_total = bytes_total + shares[d]
    end
    clamped = 1
  end
  -- Keep every byte counter within BYTES_LIMIT (read above): each domain's field first, then
  -- the totals (stats, minute, the downloader's score), scaling every domain alike.
  bytes_total = 0
  for d = 0, n_domains - 1 do
    local field = domain_field[d]
    if shares[d] > field_room[field] then shares[d] = field_room[field]; clamped = 1 end
    field_room[field] = field_room[field] - shares[d]
    bytes_total = bytes_total + shares[d]
  end
  if bytes_total > bytes_room then
    local scale = bytes_room / bytes_total
    bytes_total = 0
    for d = 0, n_domains - 1 do
      shares[d] = math.floor(shares[d] * scale)
      bytes_total = bytes_total + shares[d]
    end
    for d = 0, n_domains - 1 do   -- a rounding unit over: taken off
      local cut = math.min(math.max(bytes_total - bytes_room, 0), shares[d])
      shares[d], bytes_total = shares[d] - cut, bytes_total - cut
    end
    clamped = 1
  end
  if rtt_sum > rtt_room then rtt_sum = rtt_room end
  -- Each number is made digits once (string.format costs ~2,000 instructions with its string):
  -- a domain's share goes to its field and the log, the total to three places.
  local domains = {}
  for d = 0, n_domains - 1 do
    local share = format('%d', shares[d])
    if shares[d] > 0 then redis.call('HINCRBY', domain_bytes_key, domain_field[d], share) end
    domains[2 * d + 1] = ARGV[7 + 2 * d]
    domains[2 * d + 2] = share
  end
  local new_arg = new == 1 and '1' or format('%d', new)
  local bytes_arg = n_domains == 1 and domains[2] or format('%d', bytes_total)
  redis.call('HINCRBY', downloader_count_key, downloader, new_arg)
  redis.call('ZINCRBY', downloader_bytes_key, bytes_arg, downloader)
  if not version_known then redis.call('HSET', downloader_version_key, downloader, version) end
  redis.call('XADD', log_key, '*', 'downloader', downloader, 'ip', ip,
             'items', table.concat(new_items, '\0'), 'bytes', bytes_arg,
             'domains', table.concat(domains, '\0'), 'version', version, 'id', id,
             'at', now_digits and format('%d', now) or now)
  local safety = math.max(log_maxlen * LOG_SAFETY_FACTOR, LOG_SAFETY_MIN)
  if log_len + 1 > safety then   -- the one XADD above is the only change to the log since
    bump(stats_key, nil, 'log_entries_dropped',
         redis.call('XTRIM', log_key, 'MAXLEN', string.format('%d', safety)))
  end
  if one_bucket then
    bump(stats_key, minute_key, 'done_one_le_' .. one_bucket, 1)
  else
    bump(stats_key, minute_key, 'items_done', new, new_arg)
    for bucket, n in pairs(rtt_hist) do bump(stats_key, minute_key, 'rtt_le_' .. bucket, n) end
  end
  bump(stats_key, minute_key, 'bytes_done', bytes_total, bytes_arg)
  bump(stats_key, minute_key, 'rtt_sum_ms', rtt_sum)
  bump(stats_key, nil, 'items_dead_done', dead_done)
  bump(stats_key, nil, 'dones_bytes_clamped', clamped)
end
if #refused_items > 0 or #unknown_items > 0 then
  -- NAMES joined by NUL, at most BUDGET bytes, never cutting a UTF-8 sequence in two.
  local function bounded_join(names, budget)
    local parts, size = {}, 0
    for i, name in ipairs(names) do
      local sep = i > 1 and 1 or 0
      if size + sep + #name <= budget then
        parts[#parts + 1] = name
        size = size + sep + #name
      else
        local cut = budget - size - sep
        while cut > 0 do
          local b = string.byte(name, cut + 1)
          if b < 0x80 or b >= 0xC0 then break end   -- the next byte starts a character
          cut = cut - 1
        end
        if cut > 0 then parts[#parts + 1] = string.sub(name, 1, cut) end
        break
      end
    end
    return table.concat(parts, '\0')
  end
  local function record_bad(now_arg, names, reason)
    redis.call('XADD', bad_dones_key, 'MAXLEN', '~', BAD_DONES_MAXLEN, '*', 'downloader', downloader,
               'reason', reason, 'count', #names, 'items', bounded_join(names, BAD_ITEMS_BYTES),
               'at', now_arg)
  end
  local now_arg = now_digits and format('%d', now) or now
  -- Each XADD before its count: with one name, that is the script's first write, so a
  -- bad_dones of the wrong type fails the call before anything is written (several names:
  -- probed above).
  if #refused_items > 0 then
    record_bad(now_arg, refused_items, 'queued')
    bump(stats_key, nil, 'dones_refused', #refused_items)
  end
  if #unknown_items > 0 then
    record_bad(now_arg, unknown_items, 'unknown')
    bump(stats_key, nil, 'dones_unknown', #unknown_items)
  end
end
-- The project's total only: nothing reads done calls per minute (the minute hash holds what the
-- statistics read: items, bytes and RTTs above), and a minute's copy was one more HINCRBY.
if not one_bucket then bump(stats_key, nil, 'done_requests', 1) end
bump(stats_key, nil, 'dones_repeated', repeated)
return {200, age, new, repeated, #unknown_items, #refused_items, clamped}
