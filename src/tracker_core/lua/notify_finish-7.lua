--[[ notify_finish: record how one claimed delivery went: delivered, tried again later, dropped.

KEYS[1] due         zset  delivery id -> when it is next tried (ms)
KEYS[2] claimed     zset  delivery id -> when its claim expires (ms)
KEYS[3] claims      hash  delivery id -> the deliverer holding it
KEYS[4] deliveries  hash  delivery id -> JSON record
KEYS[5] hooks       hash  hook id -> JSON record
KEYS[6] hook_stats  hash  "ID:FIGURE" -> value
KEYS[7] stats       hash  the outbox's counters

ARGV[1] holder id  ARGV[2] delivery id
ARGV[3] outcome: 'delivered', 'retry', 'dropped' (attempts used up) or 'gone' (no such hook)
ARGV[4] now (ms)  ARGV[5] hook id  ARGV[6] status text (what the receiver answered, or why not)
ARGV[7] when to try again (ms; 'retry' only)  ARGV[8] the record, its attempts counted ('retry' only)

Returns 1 once the outcome is recorded; -4 when ARGV[1] no longer holds the delivery's claim
(it expired and another deliverer took it over): nothing is written. The hook's figures move
only while the hook exists; delivered and dropped deliveries leave the outbox.
Reply codes by name: scripts.notify_finish.codes (Python callers compare against those names).
]]
local due_key        = KEYS[1]
local claimed_key    = KEYS[2]
local claims_key     = KEYS[3]
local deliveries_key = KEYS[4]
local hooks_key      = KEYS[5]
local hook_stats_key = KEYS[6]
local stats_key      = KEYS[7]
local id, outcome, hook = ARGV[2], ARGV[3], ARGV[5]
if redis.call('HGET', claims_key, id) ~= ARGV[1] then return -4 end
redis.call('ZREM', claimed_key, id)
redis.call('HDEL', claims_key, id)
if outcome == 'retry' then
  redis.call('HSET', deliveries_key, id, ARGV[8])
  redis.call('ZADD', due_key, tonumber(ARGV[7]), id)
else
  redis.call('HDEL', deliveries_key, id)
  redis.call('HINCRBY', stats_key, outcome, 1)
end
if outcome ~= 'gone' and redis.call('HEXISTS', hooks_key, hook) == 1 then
  if outcome == 'delivered' then
    redis.call('HINCRBY', hook_stats_key, hook .. ':delivered', 1)
  else
    redis.call('HINCRBY', hook_stats_key, hook .. ':failures', 1)
  end
  if outcome == 'dropped' then redis.call('HINCRBY', hook_stats_key, hook .. ':dropped', 1) end
  redis.call('HSET', hook_stats_key, hook .. ':last_status', ARGV[6], hook .. ':last_ms', ARGV[4])
end
return 1
