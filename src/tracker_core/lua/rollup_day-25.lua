--[[ rollup_day: sum one completed day's hour hashes into the project's days hash, once.

KEYS[1]      days        hash  day number -> "items bytes requests served backlog" (kept for the
                               project's life; its field for a day is written once); requests
                               summed from the claim outcomes, items from items_done and the
                               done_one_le_B fields, as the Python readers do
KEYS[2..25]  hour:H      hash  the 24 hours of that day, in order (some may not exist)

ARGV[1] the day (days since the epoch, UTC)

Returns 1 when it wrote the day, 0 when the day was already rolled up, -1 when the day's last
hour is not rolled up yet (try again later: nothing written).
Hour hashes live 60 days; the days hash keeps a few dozen bytes a day for the whole life of the
project, so the leaderboard's "all" range is one HGETALL. backlog is the last sample of the day
("-" when none was taken), the other fields are sums.
Reply codes by name: scripts.rollup_day.codes (Python callers compare against those names).
]]
--@constants RTT_BOUNDS_S
local days_key = KEYS[1]
-- The day's last hour is rolled up last: its presence means the whole day is.
local last_hour_key = KEYS[25]
local FIRST_HOUR = 2  -- KEYS[2..25]: the day's hours, in order
local day = ARGV[1]
if redis.call('HEXISTS', days_key, day) == 1 then return 0 end
if redis.call('EXISTS', last_hour_key) == 0 then return -1 end
local sums = {items_done = 0, bytes_done = 0, requests = 0, requests_served = 0}
local backlog = '-'
-- A done call of one item with an RTT counts done_one_le_B (B a bound of RTT_BOUNDS_S or inf)
-- where it counted items_done (tracker_core.scripts.derived_counters): those are items done too.
local done_one = {}
for _, bound in ipairs(RTT_BOUNDS_S) do done_one[#done_one + 1] = string.format('done_one_le_%d', bound) end
done_one[#done_one + 1] = 'done_one_le_inf'
for i = FIRST_HOUR, #KEYS do
  -- requests is the sum of the claim outcomes (tracker_core.scripts.derived_counters.REQUEST_OUTCOMES,
  -- served first): claim-21.lua keeps no total, and one an hour may still hold is not read.
  -- requests_served_one (a request served one fresh item) is served too.
  local values = redis.call('HMGET', KEYS[i], 'items_done', 'bytes_done', 'backlog',
                            'requests_served', 'requests_served_one', 'requests_empty',
                            'requests_claims_limited', 'requests_blocked', 'requests_paused',
                            'requests_capped', 'requests_limited')
  sums.items_done = sums.items_done + (tonumber(values[1]) or 0)
  sums.bytes_done = sums.bytes_done + (tonumber(values[2]) or 0)
  if values[3] then backlog = values[3] end
  sums.requests_served = sums.requests_served + (tonumber(values[4]) or 0) + (tonumber(values[5]) or 0)
  for j = 4, 11 do sums.requests = sums.requests + (tonumber(values[j]) or 0) end
  for _, n in ipairs(redis.call('HMGET', KEYS[i], unpack(done_one))) do
    sums.items_done = sums.items_done + (tonumber(n) or 0)
  end
end
redis.call('HSET', days_key, day, string.format('%d %d %d %d %s', sums.items_done,
           sums.bytes_done, sums.requests, sums.requests_served, backlog))
return 1
