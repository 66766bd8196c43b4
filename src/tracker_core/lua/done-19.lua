--[[ done: mark items completed, idempotently, and update the leaderboard counters.

KEYS[1]  settings            hash
KEYS[2]  out                 zset  item -> claim time (ms)
KEYS[3]  claims              hash  item -> "DOWNLOADER\tIP\tTIMES_CLAIMED"
KEYS[4]  done                set
KEYS[5]  downloader_claims   hash  downloader -> claims held
KEYS[6]  log                 stream  one entry per done call with new items (capped)
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
KEYS[18] bad_dones           stream  dones for names the project never had (capped)
KEYS[19] reclaim_history     hash  earlier claim rounds of items claimed more than once

ARGV[1] now (ms)  ARGV[2] downloader  ARGV[3] version  ARGV[4] id (JSON text)
ARGV[5] number of domains D, then D pairs (domain, bytes), then the item names.

Returns {code, settings_age, new, repeated, unknown}; code 200, or -1 for an unknown project.
An item counts once: a claimed item (in out, whoever claimed it) or one still queued becomes done
and is attributed to the sender; an item already done is a repeat; a name found nowhere is unknown
(recorded in bad_dones, never added). Bytes are shared out over the items of the call, so a
repeated call adds nothing. With done_mode=discard done items are only counted, not kept.
RTT (claim to done) goes into a bounded histogram: field rtt_le_B counts items done within B
seconds (rtt_le_inf: the rest), in stats and in the minute hash, so percentiles need no samples.
]]
--@include counters
local RTT_BOUNDS_S = {1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 10800, 43200}
local function rtt_field(rtt_ms)
  for _, bound in ipairs(RTT_BOUNDS_S) do
    if rtt_ms <= bound * 1000 then return 'rtt_le_' .. bound end
  end
  return 'rtt_le_inf'
end
local settings = redis.call('HMGET', KEYS[1], 'settings_age', 'done_mode', 'log_maxlen')
local age = settings[1]
if not age then return {-1, 0} end
local keep_done = settings[2] ~= 'discard'
local log_maxlen = tonumber(settings[3]) or 100000
local now = tonumber(ARGV[1])
local downloader, version, id = ARGV[2], ARGV[3], ARGV[4]
local n_domains = tonumber(ARGV[5])
local first_item = 6 + 2 * n_domains
local stats, minute = KEYS[11], KEYS[12]

local new_items, unknown_items = {}, {}
local repeated, rtt_sum, rtt_n, rtt_hist = 0, 0, 0, {}
for i = first_item, #ARGV do
  local item = ARGV[i]
  local claimed_at = redis.call('ZSCORE', KEYS[2], item)
  local found = false
  if claimed_at then
    local claim = redis.call('HGET', KEYS[3], item)
    redis.call('ZREM', KEYS[2], item)
    redis.call('HDEL', KEYS[3], item)
    if claim then
      local claimant = string.match(claim, '^[^\t]*')
      if tonumber(string.match(claim, '\t(%d+)$') or '1') > 1 then redis.call('HDEL', KEYS[19], item) end
      if redis.call('HINCRBY', KEYS[5], claimant, -1) <= 0 then
        redis.call('HDEL', KEYS[5], claimant)
      end
    end
    local rtt_ms = now - tonumber(claimed_at)
    local field = rtt_field(rtt_ms)
    rtt_sum = rtt_sum + rtt_ms
    rtt_n = rtt_n + 1
    rtt_hist[field] = (rtt_hist[field] or 0) + 1
    found = true
  elseif redis.call('SISMEMBER', KEYS[4], item) == 1 then
    repeated = repeated + 1
  else
    for q = 13, 17 do
      if redis.call('SREM', KEYS[q], item) == 1 then found = true break end
    end
    if not found then unknown_items[#unknown_items + 1] = item end
  end
  if found then
    new_items[#new_items + 1] = item
    if keep_done then redis.call('SADD', KEYS[4], item) end
  end
end

local total = #ARGV - first_item + 1
local new = #new_items
if new > 0 then
  local bytes_total = 0
  for d = 0, n_domains - 1 do
    local domain = ARGV[6 + 2 * d]
    local bytes = math.floor(tonumber(ARGV[7 + 2 * d]) * new / total)
    if bytes > 0 then
      redis.call('HINCRBY', KEYS[10], domain, bytes)
      bytes_total = bytes_total + bytes
    end
  end
  redis.call('HINCRBY', KEYS[7], downloader, new)
  redis.call('ZINCRBY', KEYS[8], bytes_total, downloader)
  if version ~= '' then redis.call('HSET', KEYS[9], downloader, version) end
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', log_maxlen, '*', 'downloader', downloader,
             'items', table.concat(new_items, '\0'), 'bytes', bytes_total, 'version', version,
             'id', id, 'at', now)
  bump(stats, minute, 'items_done', new)
  bump(stats, minute, 'bytes_done', bytes_total)
  bump(stats, minute, 'rtt_sum_ms', rtt_sum)
  bump(stats, minute, 'rtt_count', rtt_n)
  for field, n in pairs(rtt_hist) do bump(stats, minute, field, n) end
end
bump(stats, minute, 'done_requests', 1)
bump(stats, nil, 'dones_repeated', repeated)
if #unknown_items > 0 then
  bump(stats, nil, 'dones_unknown', #unknown_items)
  redis.call('XADD', KEYS[18], 'MAXLEN', '~', 10000, '*', 'downloader', downloader,
             'items', table.concat(unknown_items, '\0'), 'at', now)
end
return {200, age, new, repeated, #unknown_items}
