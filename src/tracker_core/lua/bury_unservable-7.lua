--[[ bury_unservable: take back claims no client can receive and send them to `dead`.

The API calls this when the answer to a claim cannot carry a name the claim script just handed
out: a name that is not valid UTF-8 (old data; JSON cannot carry it) or one holding NUL (the
client splits a multi answer on NUL, and done could never report it). Checking every name in the
claim script would cost Redis a byte scan per name on every request; building the answer checks
them at no cost, so this runs only when one is found. Nothing is lost: the name leaves `out` and
waits in `dead` with its reason, where an admin sees it (`tracker dead list`).

KEYS[1] settings         hash  (its absence means: unknown project)
KEYS[2] out              zset  item -> when it may be reclaimed (ms)
KEYS[3] claims           hash  item -> "DOWNLOADER\tIP\tTIMES_CLAIMED\tCLAIMED_MS" (three fields:
                               from before claim times were kept, `out` scores its claim time)
KEYS[4] downloader_claims hash downloader -> claims held
KEYS[5] reclaim_history  hash  item -> JSON list of its earlier rounds
KEYS[6] dead             hash  item -> JSON record
KEYS[7] stats            hash  counters

ARGV[1] now (ms)  ARGV[2] downloader  ARGV[3...] pairs (item, reason)

Only claims DOWNLOADER holds are taken (the claim it was just given); others are left alone.
Returns {code, buried}: code 200, or -1 for an unknown project. Counts items_dead and
items_unservable per item buried. Every check comes before the first write.
Reply codes by name: scripts.bury_unservable.codes (Python callers compare against those names).
]]
--@include claim_record
local settings_key          = KEYS[1]
local out_key               = KEYS[2]
local claims_key            = KEYS[3]
local downloader_claims_key = KEYS[4]
local reclaim_history_key   = KEYS[5]
local dead_key              = KEYS[6]
local stats_key             = KEYS[7]
local now = tonumber(ARGV[1])
if not now or #ARGV % 2 ~= 0 then
  return redis.error_reply('bury_unservable: ARGV[1] (now, ms), ARGV[2] downloader, then pairs')
end
if redis.call('EXISTS', settings_key) == 0 then return {-1, 0} end
local downloader = ARGV[2]
local prefix = downloader .. '\t'

local buried = 0
for i = 3, #ARGV, 2 do
  local item, reason = ARGV[i], ARGV[i + 1]
  local claim = redis.call('HGET', claims_key, item)
  if claim and string.sub(claim, 1, #prefix) == prefix then
    local _, ip, times, claimed_at = parse_claim(claim)
    -- A record of three fields (from before claim times were kept): `out` scored the claim time.
    claimed_at = claimed_at or tonumber(redis.call('ZSCORE', out_key, item))
    local rounds = {}
    local text = redis.call('HGET', reclaim_history_key, item)
    if text then
      local ok, decoded = pcall(cjson.decode, text)
      if ok and type(decoded) == 'table' then rounds = decoded end
    end
    rounds[#rounds + 1] = {downloader = downloader, ip = ip or '', claimed_ms = claimed_at}
    local ok, record = pcall(cjson.encode, {reason = reason, claims = times or 1,
      last_downloader = downloader, last_ip = ip or '', last_claimed_ms = claimed_at,
      dead_ms = now, rounds = rounds})
    if not ok then record = cjson.encode({reason = reason, dead_ms = now}) end
    redis.call('ZREM', out_key, item)
    redis.call('HDEL', claims_key, item)
    redis.call('HDEL', reclaim_history_key, item)
    redis.call('HSET', dead_key, item, record)
    if redis.call('HINCRBY', downloader_claims_key, downloader, -1) <= 0 then
      redis.call('HDEL', downloader_claims_key, downloader)
    end
    buried = buried + 1
  end
end
if buried > 0 then
  redis.call('HINCRBY', stats_key, 'items_dead', buried)
  redis.call('HINCRBY', stats_key, 'items_unservable', buried)
end
return {200, buried}
