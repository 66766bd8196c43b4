--[[ notify_claim: claim the deliveries that are due for one deliverer, for a while.

KEYS[1] due         zset  delivery id -> when it is next tried (ms)
KEYS[2] claimed     zset  delivery id -> when its claim expires (ms)
KEYS[3] claims      hash  delivery id -> the deliverer holding it
KEYS[4] deliveries  hash  delivery id -> JSON record

ARGV[1] now (ms)  ARGV[2] holder id  ARGV[3] claim length (ms)  ARGV[4] most deliveries to claim

Returns {1, ID, RECORD, ID, RECORD, ...}: up to ARGV[4] deliveries due by now, each taken out of
due and held for ARGV[2] until now + ARGV[3]; no other deliverer gets them meanwhile. First,
claims that expired (their deliverer died mid-delivery) go back to due, at most 100 a call. A due
id without a record (a bug, or the hash deleted by hand) is forgotten.
Reply codes by name: scripts.notify_claim.codes (Python callers compare against those names).
]]
local due_key        = KEYS[1]
local claimed_key    = KEYS[2]
local claims_key     = KEYS[3]
local deliveries_key = KEYS[4]
local now, holder = tonumber(ARGV[1]), ARGV[2]
local expired = redis.call('ZRANGEBYSCORE', claimed_key, '-inf', now, 'LIMIT', 0, 100)
for _, id in ipairs(expired) do
  redis.call('ZREM', claimed_key, id)
  redis.call('HDEL', claims_key, id)
  redis.call('ZADD', due_key, now, id)
end
local reply = {1}
local due = redis.call('ZRANGEBYSCORE', due_key, '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(due) do
  redis.call('ZREM', due_key, id)
  local record = redis.call('HGET', deliveries_key, id)
  if record then
    redis.call('ZADD', claimed_key, now + tonumber(ARGV[3]), id)
    redis.call('HSET', claims_key, id, holder)
    reply[#reply + 1] = id
    reply[#reply + 1] = record
  end
end
return reply
