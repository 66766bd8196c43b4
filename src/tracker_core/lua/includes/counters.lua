-- Shared counters: bump a field of the project's stats hash and of the current minute's hash.
-- The minute hash gets its two-day expiry when it is created (its first increment), so charts
-- have recent per-minute data and nothing grows without bound.
--@constants MINUTE_TTL_S
local function bump(stats_key, minute_key, field, n)
  if n == 0 then return end
  redis.call('HINCRBY', stats_key, field, n)
  if minute_key then
    if redis.call('HINCRBY', minute_key, field, n) == n then
      redis.call('EXPIRE', minute_key, MINUTE_TTL_S)
    end
  end
end
