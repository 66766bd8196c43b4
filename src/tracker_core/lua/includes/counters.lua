-- Shared counters: bump a field of the project's stats hash and of the current minute's hash.
-- The minute hash gets its two-day expiry when it is created (its first increment), so charts
-- have recent per-minute data and nothing grows without bound.
--@constants MINUTE_TTL_S
-- N goes to Redis as its digits: a Lua number would be printed with %.17g, about ten times the
-- instructions (every claim and done bumps several counters); 1, the most common, as a constant
-- (string.format costs ~2,000 instructions with the string it makes), or BY when the caller has
-- N's digits already.
local function bump(stats_key, minute_key, field, n, by)
  if n == 0 then return end
  by = by or n == 1 and '1' or n == math.floor(n) and string.format('%d', n) or n
  redis.call('HINCRBY', stats_key, field, by)
  if minute_key then
    if redis.call('HINCRBY', minute_key, field, by) == n then
      redis.call('EXPIRE', minute_key, MINUTE_TTL_S)
    end
  end
end
