-- Several counters of one hash written in one HSET, from the values the script read with one
-- HMGET before its first write (which also checks the key's type): a HINCRBY per field costs a
-- Redis call each (about 2.3 us from Lua here, against about 0.25 us per extra field of one
-- HMGET or HSET), so this pays from about three fields on. Exact: the script runs alone, nothing
-- changes a field between the read and the write.
-- counters_set(KEY, FIELDS, STORED, INCREMENTS, TTL_S): STORED is the HMGET reply for FIELDS,
-- INCREMENTS the amount for each (0: left alone). A field whose stored value is not an integer a
-- Lua number holds exactly (|v| <= 2^53), or whose sum would leave that range, goes through
-- HINCRBY as before (the same result, the same error for a value that is not an integer). With
-- TTL_S (a minute hash) the key gets its expiry when the write creates one of its fields, as
-- bump() of counters.lua gives it when a HINCRBY creates one.
local COUNTER_EXACT = 2 ^ 53
local function counters_set(key, fields, stored, increments, ttl_s)
  local args, created = {}, false
  local floor, format = math.floor, string.format   -- globals cost a lookup each use
  for i = 1, #fields do
    local n = increments[i] or 0   -- a field read but not bumped
    if n ~= 0 then
      local v = stored[i] == false and 0 or tonumber(stored[i])
      local sum = v and v + n
      if v and v == floor(v) and v <= COUNTER_EXACT and v >= -COUNTER_EXACT
          and sum <= COUNTER_EXACT and sum >= -COUNTER_EXACT then
        args[#args + 1] = fields[i]
        args[#args + 1] = format('%d', sum)
        if stored[i] == false then created = true end
      elseif redis.call('HINCRBY', key, fields[i], n) == n then
        created = true
      end
    end
  end
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
  if created and ttl_s then redis.call('EXPIRE', key, ttl_s) end
end
