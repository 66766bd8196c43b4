--[[ claim: hand up to N items to one downloader, atomically.

KEYS[1]  settings           hash  project settings (its absence means: unknown project)
KEYS[2]  blocked            set   "ip:ADDRESS" and "name:DOWNLOADER" entries
KEYS[3]  todo:d:DOWNLOADER  set   the downloader's own queue
KEYS[4]  todo               set
KEYS[5]  todo:backfeed      set
KEYS[6]  todo:secondary     set
KEYS[7]  todo:redo          set
KEYS[8]  out                zset  item -> claim time (ms)
KEYS[9]  claims             hash  item -> "DOWNLOADER\tIP\tTIMES_CLAIMED"
KEYS[10] downloader_claims  hash  downloader -> claims held
KEYS[11] ratelimit          string  GCRA theoretical arrival time (ms)
KEYS[12] stats              hash  counters
KEYS[13] minute:M           hash  this minute's counters

ARGV[1] now (ms)   ARGV[2] downloader   ARGV[3] ip   ARGV[4] items wanted (1..1000)

Returns {code, settings_age, item...}:
  200 items given (at least one)     404 nothing to give: queues empty, project paused, or the
  403 downloader or IP blocked           downloader holds its maximum of claims
  429 rate limited                   -1  unknown project
Queues are visited in the order above, picking at random within each (SPOP). The rate limit is a
GCRA: items are spread evenly over time with a burst allowance, and only items actually given
consume it (a 404 costs nothing).
]]
--@include counters
local settings = redis.call('HMGET', KEYS[1], 'settings_age', 'paused', 'rate_limit',
                            'rate_burst', 'max_claims_per_downloader')
local age = settings[1]
if not age then return {-1, 0} end
local now = tonumber(ARGV[1])
local downloader, ip = ARGV[2], ARGV[3]
local wanted = tonumber(ARGV[4])
local stats, minute = KEYS[12], KEYS[13]

bump(stats, minute, 'requests', 1)
local function refuse(code, field)
  bump(stats, minute, field, 1)
  return {code, age}
end

if redis.call('SISMEMBER', KEYS[2], 'name:' .. downloader) == 1
    or redis.call('SISMEMBER', KEYS[2], 'ip:' .. ip) == 1 then
  return refuse(403, 'requests_blocked')
end
if settings[2] == '1' then return refuse(404, 'requests_paused') end

local cap = tonumber(settings[5]) or 0
if cap > 0 then
  local room = cap - (tonumber(redis.call('HGET', KEYS[10], downloader)) or 0)
  if room <= 0 then return refuse(404, 'requests_capped') end
  if room < wanted then wanted = room end
end

local rate = tonumber(settings[3]) or 0
local interval, tat
if rate > 0 then
  interval = 60000 / rate
  local burst = tonumber(settings[4]) or 0
  if burst < 1 then burst = math.max(1, rate / 60) end
  tat = tonumber(redis.call('GET', KEYS[11])) or now
  if tat < now then tat = now end
  local allowed = math.floor((now + burst * interval - tat) / interval)
  if allowed < 1 then return refuse(429, 'requests_limited') end
  if allowed < wanted then wanted = allowed end
end

local reply = {200, age}
local given = 0
for q = 3, 7 do
  local need = wanted - given
  if need <= 0 then break end
  local popped = redis.call('SPOP', KEYS[q], need)
  for i = 1, #popped do
    given = given + 1
    reply[given + 2] = popped[i]
  end
end
if given == 0 then return refuse(404, 'requests_empty') end

local claim = downloader .. '\t' .. ip .. '\t1'
local out_args, claim_args = {}, {}
for i = 1, given do
  local item = reply[i + 2]
  out_args[2 * i - 1] = now
  out_args[2 * i] = item
  claim_args[2 * i - 1] = item
  claim_args[2 * i] = claim
end
redis.call('ZADD', KEYS[8], unpack(out_args))
redis.call('HSET', KEYS[9], unpack(claim_args))
redis.call('HINCRBY', KEYS[10], downloader, given)
if rate > 0 then
  tat = tat + given * interval
  redis.call('SET', KEYS[11], tostring(tat), 'PX', math.ceil(tat - now) + 1000)
end
bump(stats, minute, 'requests_served', 1)
bump(stats, minute, 'items_claimed', given)
return reply
