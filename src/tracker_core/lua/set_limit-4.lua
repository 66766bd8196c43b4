--[[ set_limit: add, replace or remove one pattern limit and bump the settings age, in one step.

KEYS[1] settings (hash)  KEYS[2] limits (hash: name -> JSON record)
KEYS[3] limits_ready (zset: limit with held items -> when its bucket has a token)
KEYS[4] limit_tat (hash: that time for limits without held items)
ARGV[1] project name (for the notification)  ARGV[2] channel to publish on
ARGV[3] 'set' or 'remove'  ARGV[4] limit name  ARGV[5] JSON record without its seq (for 'set')
ARGV[6] the most limits a project may have
Returns the new settings age; -1 unknown project, -2 unknown limit (remove), -3 too many limits.
A replaced limit keeps its seq, so its place in the classification order does not move; the
age bump makes every node reload its compiled pattern set. A removed limit's held items are due
at once (the claim script hands them out unthrottled) and its bucket is forgotten.
Reply codes by name: scripts.set_limit.codes (Python callers compare against those names).
]]
local settings_key     = KEYS[1]
local limits_key       = KEYS[2]
local limits_ready_key = KEYS[3]
local limit_tat_key    = KEYS[4]
if redis.call('EXISTS', settings_key) == 0 then return -1 end
local name = ARGV[4]
-- Everything that can fail (a record that is not JSON, a bad maximum) fails before any write:
-- Redis keeps the writes of a script that stops half-way.
local record = ARGV[3] ~= 'remove' and cjson.decode(ARGV[5]) or nil
local most = tonumber(ARGV[6]) or 0
if ARGV[3] == 'remove' then
  if redis.call('HDEL', limits_key, name) == 0 then return -2 end
  if redis.call('ZSCORE', limits_ready_key, name) then redis.call('ZADD', limits_ready_key, 0, name) end
  redis.call('HDEL', limit_tat_key, name)
else
  local old = redis.call('HGET', limits_key, name)
  local seq
  if old then
    seq = cjson.decode(old)['seq']
  else
    if redis.call('HLEN', limits_key) >= most then return -3 end
    seq = redis.call('HINCRBY', settings_key, 'limits_seq', 1)
  end
  record['seq'] = seq
  redis.call('HSET', limits_key, name, cjson.encode(record))
end
local age = redis.call('HINCRBY', settings_key, 'settings_age', 1)
redis.call('PUBLISH', ARGV[2], ARGV[1] .. ' ' .. age)
return age
