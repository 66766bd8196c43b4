--[[ claim: hand up to N items to one downloader, atomically.

KEYS[1]  settings           hash  project settings (its absence means: unknown project), and
                                 REFILL_WATCH_FIELD while segments of a queue wait on disk; on
                                 one shard of a sharded project (docs/sharding.md), shard_share:
                                 the shard's share of rate_limit, rate_burst, the pattern
                                 limits' rates, claims_limit and max_claims_per_downloader
                                 (the last two rounded up), 1 when absent
KEYS[2]  blocked_index      zset  score 0: blocked names and merged address ranges, for the project
                                 alone ("p...") and with the global blocks ("a..."); see blocks.py
KEYS[3]  todo:d:DOWNLOADER  set   the downloader's own queue
KEYS[4]  todo               set
KEYS[5]  todo:backfeed      set
KEYS[6]  todo:secondary     set
KEYS[7]  todo:redo          set
KEYS[8]  out                zset  item -> when it may be reclaimed (ms): claim time + reclaim TTL x
                                 times claimed (the claim time before the claims kept it, below)
KEYS[9]  claims             hash  item -> "DOWNLOADER\tIP\tTIMES_CLAIMED\tCLAIMED_MS"; a record of
                                 three fields is from before: its `out` score is the claim time
KEYS[10] downloader_claims  hash  downloader -> claims held
KEYS[11] ratelimit          string  GCRA theoretical arrival time (ms)
KEYS[12] stats              hash  counters
KEYS[13] minute:M           hash  this minute's counters (one outcome field per claim past
                                   the settings, see below; no total: its readers sum them)
KEYS[14] uniq:downloaders:D hyperloglog  downloaders seen on day D (UTC)
KEYS[15] uniq:ips:D         hyperloglog  IPs seen on day D (UTC)
KEYS[16] todo:limited       zset  score 0, "LIMIT\0ITEM": items held back by a limit
KEYS[17] limits_ready       zset  limit with held items -> when its bucket next has a token (ms)
KEYS[18] limit_tat          hash  limit -> that time, kept while the limit has no held items
KEYS[19] limits             hash  limit -> JSON {pattern, rate, rate_per_s, seq}
KEYS[20] dead               hash  item -> JSON history of an item reclaimed too often
KEYS[21] reclaim_history    hash  item -> JSON list of its earlier rounds {downloader, ip, claimed_ms}

ARGV[1] now (ms)   ARGV[2] downloader   ARGV[3] ip
ARGV[4] items wanted (1..MAX_MULTI_CEILING; more is cut to it)
ARGV[5] the IP as the index compares it: "4" + 8 hex digits, "6" + 32, or "" (not an address:
        no IP block applies); computed by the caller (blocks.ip_key), as Lua parses no addresses
ARGV[6] the project's created_ms the caller's next two flags were recorded under ('' or absent:
        none)   ARGV[7] '1': the caller already counted this downloader in KEYS[14]
ARGV[8] '1': the caller already counted this IP in KEYS[15]
        A PFADD of a member already counted changes nothing, so it is skipped; the flags count
        only while the stored created_ms equals ARGV[6] (a project deleted and created again
        has new, empty uniques), read in the settings HMGET at no extra call. The caller
        (items/uniques_seen.py, UniquesSeen) records a member after a reply other than 403 and -1, the only
        replies whose claim ran the PFADDs, per project, created_ms and day (the keys' day).
ARGV[9] one visit of a claim that goes from shard to shard (docs/sharding.md; optional): ''
        or absent: the whole request, its outcome counted; 'more': other shards may follow and
        nothing was served yet, so only a served or blocked outcome is counted; 'after': an
        earlier shard served the request, so only the items are counted (items_claimed).

Returns {code, settings_age, item...}:
  200 items given (at least one)     404 nothing to give: queues empty, project paused, the
  403 downloader or IP blocked           downloader holds its maximum of claims, or the claims
  429 rate limited                       limit is reached and no claim may be reclaimed
  -1  unknown project
Unique downloaders and IPs are counted per day in HyperLogLogs (12 KB at most each, kept 62
days); a month's count is PFCOUNT over its days: counted once per period in bounded memory.
Refill on demand: while REFILL_WATCH_FIELD is set (BELOW x 16 + a bit per queue of KEYS[4..7]
whose segments wait on disk, written by `tracker maintain`), a claim that finds one of those
queues under BELOW deletes the field and publishes KEYS[1] on REFILL_CHANNEL (Redis pub/sub, no
key): the maintainer refills them at once and writes the field again. Nothing else changes.
Serve order: when `out` holds claims_limit items, reclaims first, and the room that reclaims
sent to `dead` made is then served like any request; otherwise held items of limits whose
bucket has a token, then the queues KEYS[3..7] (random within each, SPOP), then reclaims.
Blocks: one ZSCORE for the name and one ZREVRANGEBYLEX (the nearest range starting at or
below the address, LIMIT 1) for the IP, in the view "p" when the project sets
ignore_global_blocked, else "a"; a CIDR range costs what a single address does. Neither runs
when the settings' blocked_index_size is '0' (set_blocks-4.lua keeps it with the index).
A claim may be reclaimed once older than reclaim_ttl_s x its claim count, so an item that keeps
failing waits longer each round (a decaying priority); after max_reclaims reclaims it goes to
`dead` instead. `out` is scored by that due time, so the reclaims due are one range of it and a
done's ZREM leaves nothing behind; the due time is worked out again from the record when the
range reaches an item, so a TTL changed since (or a record from before claim times were kept,
scored by its claim time) moves the entry to its due time instead of reclaiming it early. A
limit's bucket holds one second's worth of its rate. Every step costs what it serves: due limits
come from a zset range, held items from a lex range, reclaims from a score range, so the cost
does not grow with the share of the queue that is held back. The project rate limit is a GCRA:
only items actually given consume it (a 404 costs nothing). Counters: items_claimed counts fresh
items only (a reclaim changes no other counter), reclaims_served every reclaim handed out,
items_reclaimed each item at its first reclaim (so reclaim rate = items_reclaimed /
items_claimed), items_dead each item sent to `dead`.
Nothing can fail once the first write is made (Redis keeps a failed script's writes): ARGV is
checked first (a Redis error and no change when it is not numeric), stored JSON is decoded under
pcall, argument lists are unpacked in chunks, and every number given to Redis stays in range.
Names are not checked here (a byte scan in Lua costs ~7-26 ns a byte, 28 us for a 4 KB URL):
the API finds a name no client can receive (not UTF-8, or holding NUL) while it builds the
answer, at no cost, and bury_unservable-7.lua sends it to `dead`. The default reclaim TTL applies
when the setting is absent (DEFAULT_RECLAIM_TTL_S of tracker_core/scripts/constants.py).
Reply codes by name: scripts.claim.codes (Python callers compare against those names).
]]
--@include counters
--@constants UNIQUES_TTL_S MAX_MULTI_CEILING DEFAULT_RECLAIM_TTL_S UNPACK_CHUNK RECLAIM_HISTORY_ROUNDS
--@constants REFILL_WATCH_FIELD REFILL_CHANNEL
-- The script makes every function anew on each run, called or not: ~1,500-2,500 instructions
-- each, hundreds more for each local of the body it captures (docs/data-model.md, "What a claim
-- and a done cost in Redis"). So the common path is written out, and the helpers of the rarer
-- ones come first, get what they use as arguments, and are made only when a claim needs them.
-- The reply {200, age, item...} is the list of items given so far: given = #reply - 2.
local FIRST_QUEUE, LAST_QUEUE = 3, 7  -- KEYS[3..7]: the queues, in serve order
local MAX_PX_MS = 366 * 86400000       -- a rate limiter state longer than a year is not worth keeping
-- A number goes to redis.call as its digits (string.format('%d')): a Lua number handed to
-- redis.call is printed with %.17g (about 2,000 instructions, 12% of a claim when every count
-- and time went so). Anything else (a fraction) goes as it is.
local floor, format = math.floor, string.format
-- This shard's share of the project-wide limits (settings field shard_share, docs/sharding.md):
-- 1 for a project of one shard; set from the settings below, before any limit is applied.
local shard_share = 1
-- The helpers of reclaims, limits and many-item claims, made when a claim needs them.
local function rare_helpers()
  local function int_arg(n)
    if n == floor(n) and n > -1e15 and n < 1e15 then return format('%d', n) end
    return n
  end
  -- A number as a limit's rate; nil when absent or not a number (NaN included).
  local function num(value)
    value = tonumber(value)
    if value ~= value then return nil end
    return value
  end
  -- Run COMMAND KEY ARGS... in chunks of whole pairs (UNPACK_CHUNK is even).
  local function call_chunked(command, key, args)
    for i = 1, #args, UNPACK_CHUNK do
      redis.call(command, key, unpack(args, i, math.min(i + UNPACK_CHUNK - 1, #args)))
    end
  end
  -- JSON of a dead record; a number cjson cannot write (inf from odd stored data) must not fail
  -- the script after its writes.
  local function dead_record(record, now)
    local ok, text = pcall(cjson.encode, record)
    if ok then return text end
    return cjson.encode({reason = record.reason or 'reclaimed too often', dead_ms = now})
  end
  -- Each reclaim keeps the round it ends in reclaim_history (the latest RECLAIM_HISTORY_ROUNDS),
  -- so a dead item carries every holder it had; done and release clear it.
  local function past_rounds(reclaim_history_key, item)
    local text = redis.call('HGET', reclaim_history_key, item)
    if not text then return {} end
    local ok, rounds = pcall(cjson.decode, text)
    return (ok and type(rounds) == 'table') and rounds or {}
  end
  -- parse_claim (made here, with the other helpers of reclaims):
--@include claim_record

  -- Hand out up to NEED claims that may be reclaimed, oldest due first, to REPLY; returns the
  -- reclaims given and how many of them were first reclaims. Every entry the range returns
  -- leaves it (reclaimed, dead, or moved to a later due time), so the loop ends; the budget
  -- bounds it anyway.
  local function take_reclaims(out_key, claims_key, downloader_claims_key, dead_key,
                               reclaim_history_key, stats_key,
                               need, now, ttl_ms, max_reclaims, downloader, ip, reply)
    local reclaimed, first_reclaims = 0, 0
    if ttl_ms <= 0 or need <= 0 then return 0, 0 end
    local now_arg = int_arg(now)
    local claim = downloader .. '\t' .. ip .. '\t'
    local budget = 4 * need + 100
    while need > 0 and budget > 0 do
      local due = redis.call('ZRANGEBYSCORE', out_key, '-inf', now_arg, 'WITHSCORES', 'LIMIT', '0',
                             int_arg(need))
      if #due == 0 then break end
      for j = 1, #due, 2 do
        local item, scored = due[j], tonumber(due[j + 1])
        budget = budget - 1
        local holder, holder_ip, times, claimed_at = parse_claim(redis.call('HGET', claims_key, item) or '')
        -- A record of three fields, from before claim times were kept: `out` scored its claim time.
        local old = holder ~= nil and claimed_at == nil
        claimed_at = claimed_at or scored
        local at = scored   -- no record, or one this script did not write: due as scored
        if not holder or times >= 1e9 then
          holder, holder_ip, times, old = nil, '', 1, false
        else
          at = claimed_at + ttl_ms * times
        end
        if at > now then
          -- Due later: the TTL grew since it was claimed, or `out` held its claim time.
          redis.call('ZADD', out_key, int_arg(at), item)
          if old then
            redis.call('HSET', claims_key, item,
                       format('%s\t%s\t%d\t%d', holder, holder_ip, times, floor(claimed_at)))
          end
        else
          if holder and redis.call('HINCRBY', downloader_claims_key, holder, -1) <= 0 then
            redis.call('HDEL', downloader_claims_key, holder)
          end
          local rounds = past_rounds(reclaim_history_key, item)
          rounds[#rounds + 1] = {downloader = holder or '', ip = holder_ip, claimed_ms = claimed_at}
          if max_reclaims > 0 and times > max_reclaims then
            redis.call('ZREM', out_key, item)
            redis.call('HDEL', claims_key, item)
            redis.call('HDEL', reclaim_history_key, item)
            redis.call('HSET', dead_key, item, dead_record({claims = times,
              last_downloader = holder or '', last_ip = holder_ip,
              last_claimed_ms = claimed_at, dead_ms = now, rounds = rounds}, now))
            bump(stats_key, nil, 'items_dead', 1)  -- totals only, as items_claimed
          else
            while #rounds > RECLAIM_HISTORY_ROUNDS do table.remove(rounds, 1) end
            local ok, text = pcall(cjson.encode, rounds)
            redis.call('HSET', reclaim_history_key, item, ok and text or '[]')
            redis.call('ZADD', out_key, int_arg(now + ttl_ms * (times + 1)), item)
            redis.call('HSET', claims_key, item, claim .. format('%d', times + 1) .. '\t' .. now_arg)
            redis.call('HINCRBY', downloader_claims_key, downloader, 1)
            reclaimed = reclaimed + 1
            if times == 1 then first_reclaims = first_reclaims + 1 end
            need = need - 1
            reply[#reply + 1] = item
          end
        end
        if need <= 0 then break end
      end
    end
    return reclaimed, first_reclaims
  end

  -- Up to NEED held items of limits whose bucket has a token, to REPLY and FRESH; a removed
  -- limit's items go out unthrottled.
  local function take_limited(limited_key, limits_ready_key, limit_tat_key, limits_key, need, now, reply,
                              fresh)
    local due = redis.call('ZRANGEBYSCORE', limits_ready_key, '-inf', int_arg(now), 'WITHSCORES', 'LIMIT',
                           '0', int_arg(need))
    for j = 1, #due, 2 do
      if need <= 0 then return end
      local name, next_at = due[j], tonumber(due[j + 1])
      local record = redis.call('HGET', limits_key, name)
      local interval, allowed = 0, need
      local per_s
      if record then
        local ok, limit = pcall(cjson.decode, record)
        per_s = ok and type(limit) == 'table' and num(limit['rate_per_s'])
        -- unreadable: served as if removed
        if not per_s or per_s <= 0 then record = nil else per_s = per_s * shard_share end
      end
      if record then
        interval = 1000 / per_s
        local burst = math.max(1, math.floor(per_s))
        if next_at < now - (burst - 1) * interval then next_at = now - (burst - 1) * interval end
        allowed = math.min(need, math.floor((now - next_at) / interval) + 1)
      end
      local held = redis.call('ZRANGEBYLEX', limited_key, '[' .. name .. '\0', '(' .. name .. '\1',
                              'LIMIT', 0, allowed + 1)
      local n = math.min(allowed, #held)
      local taken = {}
      for m = 1, n do
        local item = string.sub(held[m], #name + 2)
        reply[#reply + 1] = item
        fresh[#fresh + 1] = item
        taken[m] = held[m]
      end
      if n > 0 then call_chunked('ZREM', limited_key, taken) end
      need = need - n
      next_at = next_at + n * interval
      if #held <= n then
        redis.call('ZREM', limits_ready_key, name)
        if record then redis.call('HSET', limit_tat_key, name, next_at) end
      else
        redis.call('ZADD', limits_ready_key, next_at, name)
      end
    end
  end
  return take_reclaims, take_limited, call_chunked
end

local settings_key          = KEYS[1]
local blocked_index_key     = KEYS[2]
local out_key               = KEYS[8]
local claims_key            = KEYS[9]
local downloader_claims_key = KEYS[10]
local ratelimit_key         = KEYS[11]
local stats_key             = KEYS[12]
local minute_key            = KEYS[13]
local uniq_downloaders_key  = KEYS[14]
local uniq_ips_key          = KEYS[15]
local limited_key           = KEYS[16]
local limits_ready_key      = KEYS[17]
local limit_tat_key         = KEYS[18]
local limits_key            = KEYS[19]
local dead_key              = KEYS[20]
local reclaim_history_key   = KEYS[21]
local now = tonumber(ARGV[1])
local wanted = tonumber(ARGV[4])
if not now or not wanted then
  return redis.error_reply('claim: ARGV[1] (now, ms) and ARGV[4] (items wanted) must be numbers')
end
wanted = math.max(1, math.min(MAX_MULTI_CEILING, math.floor(wanted)))
local settings = redis.call('HMGET', settings_key, 'settings_age', 'paused', 'rate_limit',
                            'rate_burst', 'max_claims_per_downloader', 'reclaim_ttl_s',
                            'claims_limit', 'max_reclaims', 'ignore_global_blocked', 'created_ms',
                            'blocked_index_size', REFILL_WATCH_FIELD, 'shard_share')
local age = settings[1]
if not age then return {-1, 0} end
shard_share = tonumber(settings[13]) or 1
if not (shard_share > 0 and shard_share <= 1) then shard_share = 1 end   -- NaN or out of range
local downloader, ip = ARGV[2], ARGV[3]
-- A claim of a sharded project visits shard after shard (ARGV[9]) but is one request: it
-- counts its one outcome where it is served, or on its last visit.
local visit = ARGV[9] or ''
local function outcome(field)
  if visit == '' or (visit == 'more' and field == 'requests_blocked') then
    bump(stats_key, minute_key, field, 1)
  end
end
-- From here every return counts exactly one outcome (requests_served, _served_one, _empty,
-- _claims_limited, _blocked, _paused, _capped, _limited) in KEYS[12] and KEYS[13]: their sum is
-- the project's requests (tracker_core.scripts.derived_counters); no separate counter is written.

-- Blocked name, then address (hex of one width: comparing strings compares numbers). Skipped only
-- on a recorded empty index ('0'); absent (settings from before the count), the index is read.
if settings[11] ~= '0' then
  local view = settings[9] == '1' and 'p' or 'a'
  if redis.call('ZSCORE', blocked_index_key, view .. 'n:' .. downloader) then
    outcome('requests_blocked') return {403, age}
  end
  local ip_key = ARGV[5] or ''
  if ip_key ~= '' then
    local near = redis.call('ZREVRANGEBYLEX', blocked_index_key, '[' .. view .. ip_key .. '~',
                            '[' .. view .. string.sub(ip_key, 1, 1), 'LIMIT', '0', '1')[1]
    if near and string.sub(near, #view + #ip_key + 2) >= string.sub(ip_key, 2) then
      outcome('requests_blocked') return {403, age}
    end
  end
end
-- Counted after the block check: blocked clients are not participants. EXPIRE only when the
-- estimate changed (a new name or IP), so the common repeat costs one PFADD each, and none when
-- the caller counted the member before in this project's life (ARGV[6..8]).
local counted_before = settings[10] ~= false and settings[10] == ARGV[6]
for u = 1, 2 do
  if not (counted_before and ARGV[6 + u] == '1') then
    local key = u == 1 and uniq_downloaders_key or uniq_ips_key
    if redis.call('PFADD', key, u == 1 and downloader or ip) == 1 then
      redis.call('EXPIRE', key, UNIQUES_TTL_S)
    end
  end
end
if settings[2] == '1' then outcome('requests_paused') return {404, age} end

-- Settings as numbers: 0 (or the default) when absent or not a number (NaN included: it would
-- reach a ZADD score after the first write).
local cap = tonumber(settings[5]) or 0
if cap ~= cap then cap = 0 end
if cap > 0 then
  if shard_share < 1 then cap = math.ceil(cap * shard_share) end
  local room = cap - (tonumber(redis.call('HGET', downloader_claims_key, downloader)) or 0)
  if room <= 0 then outcome('requests_capped') return {404, age} end
  if room < wanted then wanted = room end
end

local rate = tonumber(settings[3]) or 0
if rate ~= rate then rate = 0 end
rate = rate * shard_share
local interval, tat
if rate > 0 then
  interval = 60000 / rate
  local burst = tonumber(settings[4]) or 0
  if burst ~= burst then burst = 0 end
  burst = burst * shard_share
  if burst < 1 then burst = math.max(1, rate / 60) end
  tat = tonumber(redis.call('GET', ratelimit_key)) or now
  if tat < now then tat = now end
  local allowed = math.floor((now + burst * interval - tat) / interval)
  if allowed < 1 then outcome('requests_limited') return {429, age} end
  if allowed < wanted then wanted = allowed end
end

local ttl_ms = tonumber(settings[6]) or DEFAULT_RECLAIM_TTL_S
if ttl_ms ~= ttl_ms then ttl_ms = DEFAULT_RECLAIM_TTL_S end
ttl_ms = ttl_ms * 1000
local claims_limit = tonumber(settings[7]) or 0
if claims_limit ~= claims_limit then claims_limit = 0 end
if claims_limit > 0 and shard_share < 1 then claims_limit = math.ceil(claims_limit * shard_share) end
local max_reclaims = tonumber(settings[8]) or 0
if max_reclaims ~= max_reclaims then max_reclaims = 0 end
local reply = {200, age}
local fresh = {}
local reclaimed, first_reclaims = 0, 0

-- `out` is counted only when a claims limit is set: most projects have none, and every call here
-- is paid on every request.
local out_size = claims_limit > 0 and redis.call('ZCARD', out_key) or 0
local limit_reached = claims_limit > 0 and out_size >= claims_limit
if claims_limit > 0 and not limit_reached and claims_limit - out_size < wanted then
  wanted = claims_limit - out_size
end
-- Counts go to SPOP and LIMIT, which take integers only (a stored cap of 2.5 must not fail here).
wanted = math.floor(wanted)
-- Refill on demand (see the contract; its cost: docs/data-model.md): the field is taken away so
-- that a claim asks once. Read before anything moves, so a queue of the wrong type fails before
-- any item moved; a value this script cannot read asks too (the maintainer writes it anew).
local watch = settings[12]
if watch then
  local n = tonumber(watch)
  local ask = not n
  if n then
    local queues = n % 16
    local below, q = (n - queues) / 16, FIRST_QUEUE + 1
    while queues > 0 do
      if queues % 2 == 1 and redis.call('SCARD', KEYS[q]) < below then ask = true break end
      queues, q = (queues - queues % 2) / 2, q + 1
    end
  end
  if ask then
    redis.call('HDEL', settings_key, REFILL_WATCH_FIELD)
    redis.call('PUBLISH', REFILL_CHANNEL, settings_key)
  end
end
-- Not at the claims limit: fresh items until WANTED, then reclaims for what they left wanting.
-- At it: reclaims first, then fresh items for the room that reclaims sent to `dead` made.
local upto, room = wanted, 0
if limit_reached then
  local take_reclaims = rare_helpers()
  reclaimed, first_reclaims = take_reclaims(out_key, claims_key, downloader_claims_key, dead_key,
                                            reclaim_history_key, stats_key,
                                            wanted, now, ttl_ms, max_reclaims, downloader, ip, reply)
  local given = #reply - 2
  upto = given
  if given < wanted then
    -- Reclaims sent to `dead` left `out`: the room they made is served from the queues, or the
    -- warrior would idle on a 404 while items wait (a reclaim given stays in `out`, counted).
    room = math.floor(claims_limit - redis.call('ZCARD', out_key))   -- SPOP takes integers
    if room > 0 then upto = given + math.min(wanted - given, room) end
  end
end
-- Fresh items until UPTO: held items whose bucket has a token, then the queues. limits_ready is
-- empty unless a limit holds items (most projects): EXISTS costs about 3,500 instructions where
-- the range read costs about 9,000 (docs/performance.md).
if upto > #reply - 2 and redis.call('EXISTS', limits_ready_key) == 1 then
  local _, take_limited = rare_helpers()
  take_limited(limited_key, limits_ready_key, limit_tat_key, limits_key, upto - (#reply - 2), now,
               reply, fresh)
end
for q = FIRST_QUEUE, LAST_QUEUE do
  local need = upto - (#reply - 2)
  if need <= 0 then break end
  if need == 1 then
    -- One item (the common claim): SPOP without a count, the cheaper call (false when empty).
    local item = redis.call('SPOP', KEYS[q])
    if item then
      reply[#reply + 1] = item
      fresh[#fresh + 1] = item
    end
  else
    local popped = redis.call('SPOP', KEYS[q], need)
    for i = 1, #popped do
      reply[#reply + 1] = popped[i]
      fresh[#fresh + 1] = popped[i]
    end
  end
end
if not limit_reached and #reply - 2 < wanted then
  local take_reclaims = rare_helpers()
  reclaimed, first_reclaims = take_reclaims(out_key, claims_key, downloader_claims_key, dead_key,
                                            reclaim_history_key, stats_key,
                                            wanted - (#reply - 2), now, ttl_ms, max_reclaims,
                                            downloader, ip, reply)
end
if #reply == 2 then
  outcome((limit_reached and room <= 0) and 'requests_claims_limited' or 'requests_empty')
  return {404, age}
end

local count = #fresh
if count > 0 then
  -- `out` scores a claim by when it may be reclaimed; with no TTL (never reclaimed while it
  -- stays so) by its claim time, and a TTL set later moves it when the reclaim range reaches it.
  local due_arg = ttl_ms > 0 and now + ttl_ms or now
  if due_arg == floor(due_arg) and due_arg > -1e15 and due_arg < 1e15 then
    due_arg = format('%d', due_arg)
  end
  -- The record keeps the claim time in whole ms: done's RTT and the claim's age read it.
  local first = downloader .. '\t' .. ip .. '\t1\t'
                .. ((now > -1e15 and now < 1e15) and format('%d', floor(now)) or '0')
  if count == 1 then
    -- One fresh item (the common claim): the calls without argument lists, ~11,000 instructions
    -- fewer than the list building and chunked calls below (docs/performance.md).
    local item = fresh[1]
    redis.call('ZADD', out_key, due_arg, item)
    redis.call('HSET', claims_key, item, first)
    redis.call('HINCRBY', downloader_claims_key, downloader, '1')
  else
    local _, _, call_chunked = rare_helpers()
    local out_args, claim_args = {}, {}
    for i = 1, count do
      local item = fresh[i]
      out_args[2 * i - 1] = due_arg
      out_args[2 * i] = item
      claim_args[2 * i - 1] = item
      claim_args[2 * i] = first
    end
    call_chunked('ZADD', out_key, out_args)
    call_chunked('HSET', claims_key, claim_args)
    redis.call('HINCRBY', downloader_claims_key, downloader, format('%d', count))
  end
end
if rate > 0 then
  tat = tat + (#reply - 2) * interval
  -- An integer number of ms in range even for a rate of 1e-300 per minute.
  local px = math.ceil(tat - now) + 1000
  if not (px <= MAX_PX_MS) then px = MAX_PX_MS end
  redis.call('SET', ratelimit_key, tostring(tat), 'PX', px)
end
-- One fresh item and no reclaim (the common claim): one outcome, requests_served_one, stands for
-- a served request and a fresh item claimed (the readers add it to both:
-- tracker_core.scripts.derived_counters), so it costs two HINCRBYs where the general case costs three.
if count == 1 and reclaimed == 0 then
  if visit == 'after' then bump(stats_key, nil, 'items_claimed', 1) return reply end
  bump(stats_key, minute_key, 'requests_served_one', 1)
  return reply
end
if visit ~= 'after' then bump(stats_key, minute_key, 'requests_served', 1) end
-- In the project's totals only: no chart or rate reads these per minute (the minute hash holds
-- what the statistics read: the outcomes here, done's items, bytes and RTTs), and a minute's
-- copy was one more HINCRBY on every claim.
bump(stats_key, nil, 'items_claimed', count)
bump(stats_key, nil, 'reclaims_served', reclaimed)
bump(stats_key, nil, 'items_reclaimed', first_reclaims)
return reply
