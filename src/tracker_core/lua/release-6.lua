--[[ release: give claims back to the main queue.

KEYS[1] settings  KEYS[2] out  KEYS[3] claims  KEYS[4] todo  KEYS[5] downloader_claims  KEYS[6] stats
ARGV[1] now (ms)  ARGV[2] downloader, or '' to release whoever holds the claim (admin)
ARGV[3...] item names

Returns {code, settings_age, released, ignored}; -1 for an unknown project. A claim held by another
downloader than ARGV[2] is left alone (ignored), as is a name that is not claimed.
]]
--@include counters
local age = redis.call('HGET', KEYS[1], 'settings_age')
if not age then return {-1, 0} end
local only = ARGV[2]
local released, ignored = 0, 0
for i = 3, #ARGV do
  local item = ARGV[i]
  local claim = redis.call('HGET', KEYS[3], item)
  local claimant = claim and string.match(claim, '^[^\t]*')
  if claim and (only == '' or claimant == only) then
    redis.call('ZREM', KEYS[2], item)
    redis.call('HDEL', KEYS[3], item)
    redis.call('SADD', KEYS[4], item)
    if redis.call('HINCRBY', KEYS[5], claimant, -1) <= 0 then
      redis.call('HDEL', KEYS[5], claimant)
    end
    released = released + 1
  else
    ignored = ignored + 1
  end
end
bump(KEYS[6], nil, 'items_released', released)
return {200, age, released, ignored}
